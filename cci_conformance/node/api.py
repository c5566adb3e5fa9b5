"""Value types of the node control API, shared by the node process, its client, backends and suites."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..cpuset import CPUs


@dataclass(frozen=True)
class ClaimRef:
    """A resource claim of a pod, as CCI sees it (KEP-3675 "attribute claims").

    ``parameters`` is the claim's JSON parameters object (the four parallel arrays of
    docs/spec.md), handed to the driver as ``AdmitRequest.resource_handle``. ``driver`` names the
    CCI driver that must serve it ("" = the node's only registered driver).
    """

    name: str
    uid: str
    parameters: dict[str, Any]
    driver: str = ""


@dataclass(frozen=True)
class ContainerSpec:
    """One container: Kubernetes quantities as strings ("2", "500m", "1Gi"); None = unset."""

    name: str
    cpu_request: str | None = None
    cpu_limit: str | None = None
    memory_request: str | None = None
    memory_limit: str | None = None
    claim: str | None = None  # name of a ClaimRef of the pod this container uses (at most one)


@dataclass(frozen=True)
class PodSpec:
    namespace: str
    name: str
    uid: str
    containers: tuple[ContainerSpec, ...]
    claims: tuple[ClaimRef, ...] = ()


@dataclass(frozen=True)
class ContainerAssignment:
    """Where a container runs: ``source`` is "cci" (driver), "static" (static CPU manager) or "shared"."""

    pod_uid: str
    container: str
    container_id: str
    cpus: CPUs
    exclusive: bool
    source: str
    groups: tuple[CPUs, ...] = ()  # per core group for CCI containers (AdmitResponse.groups)


@dataclass(frozen=True)
class AdmissionResult:
    """The outcome of creating a pod: admitted with assignments, or rejected with a reason."""

    admitted: bool
    reason: str = ""  # machine-readable reason, e.g. "CCIAdmitError", "SMTAlignmentError", "DriverTimeout"
    message: str = ""  # human-readable detail
    containers: tuple[ContainerAssignment, ...] = ()
    node_seconds: float = 0.0  # wall time of the whole admission inside the node
    driver_seconds: float = 0.0  # time spent waiting on driver RPCs during it


@dataclass(frozen=True)
class ContainerState:
    """A live container as the node's store and the runtime see it."""

    namespace: str
    pod_name: str
    pod_uid: str
    container: str
    container_id: str
    source: str  # "cci" | "static" | "shared"
    store_cpus: CPUs  # what the store says the container may use
    runtime_cpus: CPUs  # what the runtime applied (cpuset.cpus of its cgroup-like file)
    exclusive: bool
    claim_uid: str = ""
    claim_name: str = ""  # with claim_uid: what the node sent the driver (suites retry calls with them)
    running: bool = True


class SnapshotError(TypeError):
    """A backend handed over a NodeSnapshot or PersistedState without a field, or with one of the wrong type."""


@dataclass(frozen=True)
class OwedRemove:
    """A CCIRemoveContainerResource the node owes a driver until the driver acknowledges it (docs/spec.md S1.7,
    S3.5). ``why``: "admission" (written before CCIAdmit is sent, so it is owed while the call is in flight),
    "removal" (the container was removed), "gone-while-down" (the runtime lost it while the node was down) or
    "add-unconfirmed" (a pod refused after its CCIAddContainerResource failed: the Add may or may not have
    landed, so both the container id and the empty one are sent)."""

    driver: str
    pod_uid: str
    container: str
    container_id: str
    why: str

    def __str__(self) -> str:
        return f"{self.why}: {self.driver} {self.pod_uid}/{self.container} ({self.container_id[:12]})"


def _check_fields(value, types: dict[str, type | tuple[type, ...]], items: dict[str, type]) -> None:
    """Every field present with its type (and each item of a collection field with its item type)."""
    name = type(value).__name__
    for field_name, want in types.items():
        got = getattr(value, field_name)
        if not isinstance(got, want):
            raise SnapshotError(f"{name}.{field_name} is {type(got).__name__} {got!r:.80}, not {want}: the "
                                "backend must fill every field of the contract (backends/base.py)")
        if field_name in items:
            member = got.values() if isinstance(got, dict) else got
            bad = next((m for m in member if not isinstance(m, items[field_name])), None)
            if bad is not None:
                raise SnapshotError(f"{name}.{field_name} holds {type(bad).__name__} {bad!r:.80}, not "
                                    f"{items[field_name].__name__}")


@dataclass(frozen=True)
class NodeSnapshot:
    """The node's whole CPU accounting at one instant, as every backend reports it (backends/base.py).

    Every field is required and type-checked when the snapshot is made: a backend that cannot fill one
    fails the test that asked, it never hands over a default that a check would read as "nothing wrong".
    """

    mode: str  # "alpha" | "coexistence"
    online: CPUs
    reserved: CPUs
    shared_pool: CPUs
    exclusive: dict[str, CPUs]  # "<pod_uid>/<container>" -> exclusive CPUs (static and CCI), withheld included
    containers: tuple[ContainerState, ...]
    drivers: tuple[str, ...]  # names of registered CCI drivers
    node_generation: int  # increments on every node (re)start
    policy: str  # the static-QoS CPU manager policy: "static" | "none"
    withheld: dict[str, CPUs]  # "<pod_uid>/<container>" -> siblings held back (CORE-SIBLING-DENIED)
    pending: tuple[OwedRemove, ...]  # CCIRemoveContainerResource calls owed to drivers
    startup: tuple[str, ...]  # what the last node start reconciled, one line each
    refused: dict[str, str]  # registration socket -> why the node refused it
    registrations: int  # successful driver registrations since the node started

    def __post_init__(self) -> None:
        _check_fields(self, {"mode": str, "online": frozenset, "reserved": frozenset, "shared_pool": frozenset,
                             "exclusive": dict, "containers": tuple, "drivers": tuple, "node_generation": int,
                             "policy": str, "withheld": dict, "pending": tuple, "startup": tuple, "refused": dict,
                             "registrations": int},
                      {"exclusive": frozenset, "containers": ContainerState, "drivers": str, "withheld": frozenset,
                       "pending": OwedRemove, "startup": str, "refused": str})
        if self.policy not in ("static", "none"):
            raise SnapshotError(f"NodeSnapshot.policy is {self.policy!r}, not 'static' or 'none'")


@dataclass(frozen=True)
class PersistedState:
    """What the node has made durable, read from its files without asking the node (which may be mid-admission
    or down). Both nodes keep the same two checkpoints: the kubelet's ``cpu_manager_state`` (upstream format)
    and the CCI manager's ``cci_manager_state`` (docs/spec.md S3.5; the embedded node adds a journal)."""

    cpu_manager_state: bytes  # the kubelet's file as on disk; the harness parses and verifies it itself
    cci_content: str  # canonical JSON of the CCI checkpoint's content (journal applied) without the counters
    # that change on every write (generation, journal epoch, cpu_manager_state checksums)
    pending: tuple[OwedRemove, ...]  # the owed Removes the checkpoint holds; "admission": CCIAdmit in flight

    def __post_init__(self) -> None:
        _check_fields(self, {"cpu_manager_state": bytes, "cci_content": str, "pending": tuple},
                      {"pending": OwedRemove})
