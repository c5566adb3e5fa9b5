"""The typed contract between the DRA suites and a node running a DRA CPU driver (DRA's NodeSession)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..cpuset import CPUs, format_cpulist
from ..errors import ConfigError
from ..kind.cluster.cpuset_log import Record
from ..topology.model import Topology

POLICIES = ("none", "static")
# How a DRA CPU driver publishes CPUs (dra-driver-cpu's --cpu-device-mode): a device per CPU, or a device per
# NUMA node whose consumable capacity (KEP-5075, beta and on by default since 1.36) is its CPUs
DEVICE_MODES = ("individual", "grouped")
RESTART_POLICIES = ("Always", "OnFailure", "Never")


@dataclass(frozen=True)
class NodeProfile:
    """The kubelet's CPU manager on the node under test: policy none, or static with reserved CPUs."""

    name: str
    policy: str = "none"
    reserved: CPUs = frozenset()

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ConfigError(f"unknown CPU manager policy {self.policy!r}", field="cpuManagerPolicy",
                              fix=f"use one of {', '.join(POLICIES)}")
        if self.policy == "static" and not self.reserved:
            # the kubelet refuses the static policy without a reserved CPU
            raise ConfigError("the static policy needs reserved CPUs", field="reservedSystemCPUs",
                              fix='reserve at least one CPU, e.g. "0"')

    def describe(self) -> str:
        return self.policy + (f", reserved {format_cpulist(self.reserved)}" if self.reserved else "")


POLICY_NONE = NodeProfile("none")


def static_reserved(reserved: CPUs = frozenset({0})) -> NodeProfile:
    return NodeProfile("static-reserved", "static", frozenset(reserved))


@dataclass(frozen=True)
class ClaimSpec:
    """Exactly ``count`` CPUs of the driver; a selector narrows them to one NUMA node or one socket."""

    name: str
    count: int
    numa_node: int | None = None
    socket: int | None = None
    # True: a ResourceClaimTemplate, so the pod gets a claim of its own (named in PodState.claims).
    template: bool = False
    # JSON text of an object: opaque parameters for the driver (spec.devices.config[].opaque.parameters), "" none.
    opaque: str = ""

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError(f"claim {self.name}: a claim asks for at least one CPU, not {self.count}")
        if self.opaque:
            try:
                parsed = json.loads(self.opaque)
            except ValueError as exc:
                raise ValueError(f"claim {self.name}: opaque parameters are not JSON ({exc})") from None
            if not isinstance(parsed, dict):
                # the API server keeps parameters as a RawExtension, which must be a JSON object
                raise ValueError(f"claim {self.name}: opaque parameters must be a JSON object, not {self.opaque!r}")


@dataclass(frozen=True)
class ContainerSpec:
    """One container: the pod's claims it consumes, or a Guaranteed CPU request (integer requests = limits)."""

    name: str
    claims: tuple[str, ...] = ()
    guaranteed_cpus: int = 0


@dataclass(frozen=True)
class PodSpec:
    """A pod on the node under test. ``claims`` are created with it; ``existing_claims`` name claims made before."""

    name: str
    containers: tuple[ContainerSpec, ...] = (ContainerSpec("c0"),)
    claims: tuple[ClaimSpec, ...] = ()
    existing_claims: tuple[str, ...] = ()
    restart: str = "Always"
    # An init container that runs until the session stops it: the kubelet prepares every claim of a pod
    # before its first container (KEP-4381), so the claims are prepared and the containers not yet made.
    hold_init: bool = False

    def __post_init__(self) -> None:
        if self.restart not in RESTART_POLICIES:
            raise ValueError(f"pod {self.name}: restart policy {self.restart!r} is not one of {RESTART_POLICIES}")
        known = {c.name for c in self.claims} | set(self.existing_claims)
        for container in self.containers:
            unknown = set(container.claims) - known
            if unknown:
                raise ValueError(f"pod {self.name}: container {container.name} uses unknown claims {sorted(unknown)}")

    @classmethod
    def claimed(cls, name: str, *counts: int, numa_node: int | None = None) -> PodSpec:
        """One container ``c0`` consuming one claim per count (claims named ``<pod>-c<i>``)."""
        claims = tuple(ClaimSpec(f"{name}-c{i}", n, numa_node=numa_node) for i, n in enumerate(counts))
        return cls(name, (ContainerSpec("c0", tuple(c.name for c in claims)),), claims)

    @classmethod
    def shared(cls, name: str) -> PodSpec:
        """A pod without claims: its container belongs in the shared pool."""
        return cls(name)


# The kubelet's waiting reasons for a container the runtime refused to create or start (ErrCreateContainer of
# kubelet/kuberuntime/kuberuntime_container.go, ErrRunContainer of kubelet/container/sync_result.go); an NRI
# plugin's error in CreateContainer or StartContainer ends here. Such a pod is not on its way to running: the
# kubelet only tries the container again on its back-off.
RUNTIME_REFUSALS = frozenset({"CreateContainerError", "RunContainerError"})
# How long a refusal must last before create_pod gives up waiting for the pod (docs/spec-dra.md S5.6): the kubelet
# tries a refused container again within seconds, so this spans several refused attempts.
REFUSAL_GRACE_S = 30.0


@dataclass(frozen=True)
class ContainerState:
    name: str
    container_id: str  # "" before the runtime made it
    running: bool
    restart_count: int = 0
    claims: tuple[str, ...] = ()  # the ResourceClaims it consumes (resources.claims, templates resolved)
    waiting: str = ""  # "<reason>: <message>" the kubelet reports for a container it has not started, else ""

    @property
    def refused(self) -> bool:
        """The runtime refused to create or start it (an NRI plugin's error lands here), not merely not yet."""
        return self.waiting.split(":", 1)[0] in RUNTIME_REFUSALS


@dataclass(frozen=True)
class PodState:
    """A pod as the API server reports it, with the claims it ended up with and its events."""

    name: str
    uid: str
    phase: str
    containers: tuple[ContainerState, ...]
    claims: tuple[str, ...] = ()  # ResourceClaim names, templates resolved
    events: tuple[str, ...] = ()
    scheduled_to_ready_s: float | None = None  # pod start latency (PodScheduled -> Ready), None before Ready

    @property
    def running(self) -> bool:
        return bool(self.containers) and all(c.running for c in self.containers)

    def container(self, name: str) -> ContainerState:
        for c in self.containers:
            if c.name == name:
                return c
        raise KeyError(f"pod {self.name} has no container {name}")


class PodRefused(TimeoutError):
    """A pod create_pod waited for will not start: the runtime kept refusing one of its containers."""


class RefusalWatch:
    """Ends a wait for a pod to run once the runtime refused one of its containers ``grace`` seconds ago and refuses
    it still (the latest look shows a refusal again); ``grace`` None never ends it early."""

    def __init__(self, grace: float | None, clock: Callable[[], float] = time.monotonic):
        self.grace = grace
        self.clock = clock
        self.first: float | None = None
        self.refused: tuple[ContainerState, ...] = ()

    def settled(self, state: PodState) -> PodState | None:
        """``state`` when the wait is over (the pod runs, or its refusal outlasted the grace), else None."""
        if state.running:
            return state
        refused = tuple(c for c in state.containers if c.refused)
        if self.grace is None or not refused:
            return None  # a look between two attempts (or before any) decides nothing
        now = self.clock()
        self.first = now if self.first is None else self.first
        self.refused = refused
        return state if now - self.first >= self.grace else None

    def describe(self) -> str:
        return "; ".join(f"container {c.name} refused for {self.grace:g} s and more ({c.waiting})"
                         for c in self.refused)


@dataclass(frozen=True)
class Allocation:
    """A ResourceClaim's allocation result: its devices, their CPUs, and the pods it is reserved for."""

    claim: str
    allocated: bool
    devices: tuple[str, ...] = ()
    cpus: CPUs = frozenset()  # individual mode: the CPUs of its devices
    reserved_for: tuple[str, ...] = ()
    # grouped mode: (group device, CPUs of it consumed). Which CPUs the driver picks is its choice at prepare
    # time, so only the runtime's cpusets of the claim's containers show them (checks.claim_cpus)
    shares: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Device:
    """One device of the driver's ResourceSlices on the node: a CPU in individual mode, a NUMA node's CPUs as
    consumable capacity in grouped mode."""

    name: str
    cpu: int | None
    numa_node: int | None
    socket: int | None
    core: int | None
    attributes: tuple[tuple[str, object], ...] = ()
    capacity: int | None = None  # grouped mode: the CPUs claims may consume of it (capacity <driver>/cpu)


@dataclass(frozen=True)
class PreparedClaim:
    """One claim in the kubelet's ``dra_manager_state`` checkpoint."""

    claim_uid: str
    claim_name: str
    namespace: str
    pod_uids: frozenset[str]
    devices: tuple[tuple[str, str, str], ...]  # (driver, pool, device)


@dataclass(frozen=True)
class CpuManagerView:
    """The kubelet's ``cpu_manager_state``: the policy, its shared pool and what it pinned."""

    policy: str
    default_cpuset: CPUs
    assigned: tuple[tuple[str, str, CPUs], ...] = ()  # (pod UID, container, CPUs)

    def pinned(self) -> CPUs:
        return frozenset().union(*(cpus for _, _, cpus in self.assigned))


@dataclass(frozen=True)
class KubeletCheckpoints:
    prepared: tuple[PreparedClaim, ...]
    cpu_manager: CpuManagerView

    def claim(self, name: str, namespace: str = "default") -> PreparedClaim | None:
        return next((c for c in self.prepared if (c.namespace, c.claim_name) == (namespace, name)), None)


@dataclass(frozen=True)
class Histogram:
    """A Prometheus histogram summed over the series that matched: cumulative buckets (upper bound, count)."""

    name: str
    buckets: tuple[tuple[float, int], ...]
    count: int
    total: float

    def quantile_bound(self, q: float) -> float | None:
        """The smallest bucket bound holding the q-quantile (the histogram cannot say more); None if empty."""
        if self.count == 0:
            return None
        rank = q * self.count
        for bound, cumulative in self.buckets:
            if cumulative >= rank:
                return bound
        return float("inf")

    def minus(self, before: Histogram) -> Histogram:
        """The observations made since ``before`` (the kubelet's counters only grow while it runs)."""
        earlier = dict(before.buckets)
        return Histogram(self.name, tuple((b, c - earlier.get(b, 0)) for b, c in self.buckets),
                         self.count - before.count, self.total - before.total)


@dataclass(frozen=True)
class KubeletMetrics:
    # dra_grpc_operations_duration_seconds, method NodePrepareResources, gRPC status OK, this driver: one
    # observation per call the kubelet made to the driver
    node_prepare: Histogram
    # dra_operations_duration_seconds{operation_name="PrepareResources",is_error="false"}: the kubelet's whole
    # preparation of one pod (every pod, with or without claims)
    prepare_resources: Histogram
    # runnable tasks per CPU on the machine the kubelet and the driver run on (5-min load average / CPUs) when
    # the metrics were read: the kubelet times calls by the wall clock, so a loaded host shows in them. None: no
    # wall clock (a modelled node)
    host_load_per_cpu: float | None = None


@dataclass(frozen=True)
class DraSessionConfig:
    """What a DRA suite asks for: a machine, a kubelet profile, the driver's manifest and a Kubernetes release."""

    topology: Topology
    profile: NodeProfile
    driver_manifest: Path
    kubernetes: str
    workdir: Path
    device_mode: str = "individual"  # DEVICE_MODES
    env: tuple[tuple[str, str], ...] = field(default=())


# The hooks a session may not offer, and what each lets a test do. A test that needs one the session does not
# list is untested with this text as its reason, never passed.
FEATURES = {
    "kubelet-restart": "restart_kubelet(): kill -9 the kubelet or systemctl restart it, containers running",
    "kubelet-stop": "stop_kubelet()/start_kubelet(): the kubelet down while the API and the runtime go on",
    "driver-restart": "restart_driver(): the driver process replaced, hard (killed) or graceful",
    "driver-stop": "stop_driver()/start_driver(): no driver on the node for a while",
    "container-restart": "stop_container(): a container killed, restarted by the kubelet in its pod",
    "cpuset-effective": "effective_cpus(): the kernel's cpuset.cpus.effective of a container",
    "checkpoints": "checkpoints(): the kubelet's dra_manager_state and cpu_manager_state files",
    "metrics": "metrics(): the kubelet's DRA histograms",
}


def missing_feature(session: DraSession, feature: str) -> str:
    """"" when the session offers ``feature``; otherwise the untested reason naming the backend."""
    if feature not in FEATURES:
        raise ValueError(f"unknown DRA session feature {feature!r}; known: {sorted(FEATURES)}")
    if feature in session.features:
        return ""
    why = getattr(session, "feature_reasons", {}).get(feature)  # a cluster node says why it does not allow it
    return f"backend {session.backend_name} cannot offer {FEATURES[feature].split(': ', 1)[1]} ({feature})" + \
        (f": {why}" if why else "")


class DraSession(Protocol):
    """One node of a real or modelled cluster running one DRA driver. Every call has a deadline; close() leaves
    nothing behind. Claims are allocated by the scheduler and prepared by the kubelet, as on any cluster."""

    backend_name: str
    features: frozenset[str]
    topology: Topology
    profile: NodeProfile
    node: str
    driver_name: str
    device_mode: str  # DEVICE_MODES: how claims ask for CPUs (objects.claim_object)

    def create_pod(self, pod: PodSpec, *, wait: bool = True, timeout: float = 120,
                   refusal_grace: float | None = REFUSAL_GRACE_S) -> PodState: ...
    # wait=True: until every container runs (TimeoutError otherwise; PodRefused, a TimeoutError, once the runtime
    # has refused a container for refusal_grace seconds; None waits out the timeout, for a caller to whom a pod
    # that never starts is the passing outcome); False: returns at once
    def pod(self, name: str) -> PodState: ...
    def delete_pod(self, name: str, *, timeout: float = 120) -> None: ...  # and the claims made with it
    def delete_pods(self, names: Sequence[str], *, timeout: float = 120) -> None: ...  # all at once, as delete_pod
    def allocation(self, claim: str) -> Allocation: ...
    def slices(self) -> tuple[Device, ...]: ...
    def cpuset_records(self) -> tuple[Record, ...]: ...  # the runtime's creates and updates, in order
    def running_container_ids(self) -> frozenset[str]: ...

    def restart_kubelet(self, hard: bool = True) -> None: ...
    def stop_kubelet(self) -> None: ...
    def start_kubelet(self) -> None: ...
    def restart_driver(self, hard: bool = True) -> None: ...
    def stop_driver(self) -> None: ...
    def start_driver(self) -> None: ...
    def stop_container(self, pod: str, container: str) -> None: ...

    def effective_cpus(self, pod: str, container: str) -> CPUs: ...
    def checkpoints(self) -> KubeletCheckpoints: ...
    def metrics(self) -> KubeletMetrics: ...
    def collect_evidence(self, dest: Path) -> list[Path]: ...
    def close(self) -> None: ...
