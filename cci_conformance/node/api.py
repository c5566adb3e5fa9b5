"""Value types of the node control API, shared by the node process, its client, backends and suites."""

from __future__ import annotations

from dataclasses import dataclass, field
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
    running: bool = True


@dataclass(frozen=True)
class NodeSnapshot:
    """The node's whole CPU accounting at one instant (read through the control API)."""

    mode: str  # "alpha" | "coexistence"
    online: CPUs
    reserved: CPUs
    shared_pool: CPUs
    exclusive: dict[str, CPUs]  # "<pod_uid>/<container>" -> exclusive CPUs (static and CCI)
    containers: tuple[ContainerState, ...]
    drivers: tuple[str, ...]  # names of registered CCI drivers
    node_generation: int = 0  # increments on every node (re)start
    # What the suites read besides the ledger, as typed fields every backend must fill (a missing one must
    # fail a test, never default it into a pass):
    policy: str = "none"  # the static-QoS CPU manager policy: "static" | "none"
    withheld: dict[str, CPUs] = field(default_factory=dict)  # "<pod_uid>/<container>" -> siblings held back
    pending: tuple[str, ...] = ()  # CCIRemoveContainerResource calls owed to drivers, one line each
    startup: tuple[str, ...] = ()  # what the last node start reconciled
    refused: dict[str, str] = field(default_factory=dict)  # registration socket -> refusal reason
    registrations: int = 0  # successful driver registrations since the node started

    @property
    def extra(self) -> dict[str, Any]:
        """The untyped view older callers read; new code reads the typed fields."""
        return {"withheld": {k: sorted(v) for k, v in self.withheld.items()}, "pending": list(self.pending),
                "startup": list(self.startup), "refused": dict(self.refused), "policy": self.policy,
                "registrations": self.registrations}
