"""An in-process model of a node with a DRA CPU driver, for the harness's own tests of the DRA suites (never a run).

It behaves as a correct driver on a correct kubelet would; each name in ``faults`` breaks one rule, so a test of
the suites can show that the requirement guarding that rule fails (and only then is the suite worth anything).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ..cpuset import CPUs
from ..kind.cluster.cpuset_log import Record
from ..topology.model import Topology
from .api import (
    DEVICE_MODES,
    FEATURES,
    REFUSAL_GRACE_S,
    Allocation,
    ClaimSpec,
    ContainerState,
    CpuManagerView,
    Device,
    Histogram,
    KubeletCheckpoints,
    KubeletMetrics,
    NodeProfile,
    PodSpec,
    PodState,
    PreparedClaim,
)

FAULTS = {
    "split-cores": "claims take CPUs in id order, splitting cores",
    "ignore-selector": "a NUMA or socket selector is ignored",
    "shared-overlaps": "shared containers keep every CPU not reserved, claims included",
    "starve-shared": "the shared pool loses one CPU more than the grants take",
    "share-claim-across-pods": "a second pod runs on a claim another pod holds",
    "forget-on-driver-restart": "a restarted driver forgets its grants (upstream #258)",
    "reprepare-on-kubelet-restart": "a restarted kubelet has claims prepared again onto other CPUs",
    "leak-on-delete": "a pod deleted while the kubelet was down keeps its claim's CPUs out of the pool",
    "slow-prepare": "every NodePrepareResources call takes 0.5 s",
    "publish-reserved": "the reserved CPUs are published as devices too",
    "wrong-count": "a claim gets one CPU fewer than asked for",
    "empty-the-pool": "a claim of every CPU left runs, leaving shared containers none (upstream #295)",
    "ignore-static-pins": "a claim runs on CPUs the kubelet's static policy pinned to a Guaranteed pod (#134)",
    "release-on-stop": "a stopped claimed container's CPUs go to the shared pool until it is back (upstream #235)",
    "ignore-opaque-config": "a claim's opaque parameters are never read: any config is prepared",
    "vague-config-refusal": "a claim with opaque parameters is refused without naming the field",
}
BUCKETS = (0.1, 0.1536, 0.2354, 0.3608, 0.5530, 0.8475, 1.2988, 1.9905)


@dataclass
class _Claim:
    spec: ClaimSpec
    name: str
    cpus: CPUs = frozenset()
    reserved_for: set[str] = field(default_factory=set)
    uid: str = ""


@dataclass
class _Pod:
    spec: PodSpec
    uid: str
    claims: tuple[str, ...]
    containers: dict[str, ContainerState] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)


class FakeDraSession:
    """A DraSession on a modelled node: scheduler, kubelet, driver and runtime in one object."""

    backend_name = "fake"

    def __init__(self, topology: Topology, profile: NodeProfile, faults: frozenset[str] = frozenset(),
                 driver_name: str = "dra.cpu", host_load_per_cpu: float | None = None,
                 device_mode: str = "individual"):
        unknown = set(faults) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; known: {sorted(FAULTS)}")
        if device_mode not in DEVICE_MODES:
            raise ValueError(f"unknown device mode {device_mode!r}; known: {DEVICE_MODES}")
        self.topology, self.profile, self.faults = topology, profile, frozenset(faults)
        # grouped: the scheduler hands out a count of one NUMA node's CPUs, the driver picks them at prepare
        self.device_mode = device_mode
        self.node, self.driver_name = "fake-worker", driver_name
        self.features = frozenset(FEATURES) - {"cpuset-effective"}
        self._claims: dict[str, _Claim] = {}
        self._pods: dict[str, _Pod] = {}
        self._records: list[Record] = []
        self._ids = itertools.count(1)
        self._clock = datetime(2026, 1, 1, tzinfo=UTC)
        self._driver_up = self._kubelet_up = True
        self._forgotten: CPUs = frozenset()  # grants a restarted driver no longer knows
        self._prepare_calls: list[float] = []
        self._pinned: dict[tuple[str, str], CPUs] = {}  # the kubelet's static-policy assignments
        self.host_load_per_cpu = host_load_per_cpu  # what metrics() says the host's load was (None: no host)

    # -- the model -------------------------------------------------------------------------------
    def _tick(self) -> datetime:
        self._clock += timedelta(milliseconds=10)
        return self._clock

    def _granted(self) -> CPUs:
        return frozenset().union(*(c.cpus for c in self._claims.values() if c.reserved_for))

    def _pool(self) -> CPUs:
        online = self.topology.online_cpus - self.profile.reserved
        if "shared-overlaps" in self.faults:
            return online
        pool = online - (self._granted() - self._forgotten)
        return pool - {min(pool)} if "starve-shared" in self.faults and len(pool) > 1 else pool

    def _record(self, op: str, cid: str, cpus: CPUs | None, pod: str = "", container: str = "") -> None:
        self._records.append(Record(len(self._records), op, cid, cpus, self._tick(), "container", "default", pod,
                                    container))

    def _publish(self) -> CPUs:
        return self.topology.online_cpus if "publish-reserved" in self.faults else \
            self.topology.online_cpus - self.profile.reserved

    def _allocate(self, claim: _Claim) -> CPUs | None:
        """The scheduler's choice among the published devices, in the driver's order (whole cores first)."""
        # an allocated device is the scheduler's to no other claim, prepared or not (two claims of one pod too)
        free = self._publish() - frozenset().union(*(c.cpus for c in self._claims.values()))
        spec = claim.spec
        if "ignore-selector" not in self.faults:
            if spec.numa_node is not None:
                free &= self.topology.node_cpus.get(spec.numa_node, frozenset())
            if spec.socket is not None:
                free &= frozenset(c for c, cpu in self.topology.by_id.items() if cpu.package == spec.socket)
        if self.device_mode == "grouped":  # one group device: the first NUMA node with room for the share
            fits = [cpus for _, cpus in sorted(self.topology.node_cpus.items()) if len(cpus & free) >= spec.count]
            free = free & fits[0] if fits else frozenset()
        if "split-cores" in self.faults:
            order = sorted(free)
        else:
            whole = [sorted(core) for core in self.topology.cores if core <= free]
            order = [c for core in whole for c in core] + sorted(free - frozenset().union(*map(frozenset, whole)))
        want = spec.count - (1 if "wrong-count" in self.faults and spec.count > 1 else 0)
        return frozenset(order[:want]) if len(order) >= spec.count else None

    def _pin(self, pod: _Pod) -> None:
        """The kubelet's static policy: whole free cores, lowest first, for each Guaranteed container. It knows
        nothing of DRA claims (upstream #134), which is why a driver must look at what it pinned."""
        if self.profile.policy != "static":
            return
        for c in pod.spec.containers:
            if c.guaranteed_cpus:
                free = self.topology.online_cpus - self.profile.reserved - frozenset().union(*self._pinned.values())
                order = [n for core in self.topology.cores if core <= free for n in sorted(core)]
                self._pinned[pod.spec.name, c.name] = frozenset(order[:c.guaranteed_cpus])

    def _pin_conflict(self, pod: _Pod) -> CPUs:
        if self.profile.policy != "static" or "ignore-static-pins" in self.faults:
            return frozenset()
        taken = frozenset().union(*(self._claims[n].cpus for n in pod.claims))
        return taken & frozenset().union(*self._pinned.values())

    def _would_empty_pool(self, pod: _Pod) -> bool:
        shared_running = any(not p.claims and any(c.running for c in p.containers.values())
                             for p in self._pods.values())
        taken = frozenset().union(*(self._claims[n].cpus for n in pod.claims))
        return shared_running and not (self.topology.online_cpus - self.profile.reserved - self._granted() - taken)

    def _update_shared(self) -> None:
        """The driver's NRI plugin moves every shared container to the new pool (it updates running containers)."""
        if not self._driver_up:
            return
        pool = self._pool()
        for pod in self._pods.values():
            if not pod.claims:
                for state in pod.containers.values():
                    if state.running:
                        self._record("update", state.container_id, pool, pod.spec.name, state.name)

    def _cpus_for(self, pod: _Pod, container: str) -> CPUs | None:
        spec = next(c for c in pod.spec.containers if c.name == container)
        if (pod.spec.name, container) in self._pinned:
            return self._pinned[pod.spec.name, container]
        names = [self._claim_name(pod.spec.name, n) for n in spec.claims]
        if names:
            return frozenset().union(*(self._claims[n].cpus for n in names))
        return self._pool() if self._driver_up else None  # no NRI plugin: the runtime sets no cpuset

    def _consumed(self, pod: _Pod, container: str) -> tuple[str, ...]:
        spec = next(c for c in pod.spec.containers if c.name == container)
        return tuple(self._claim_name(pod.spec.name, n) for n in spec.claims)

    def _claim_name(self, pod: str, claim: str) -> str:
        spec = self._pods[pod].spec if pod in self._pods else None
        templated = {f"{pod}-{c.name}" for c in spec.claims if c.template} if spec else set()
        return f"{pod}-{claim}" if f"{pod}-{claim}" in templated else claim

    def _try_start(self, pod: _Pod) -> None:
        if pod.containers or not self._kubelet_up:
            return
        for name in pod.claims:
            claim = self._claims[name]
            others = claim.reserved_for - {pod.spec.name}
            if others and "share-claim-across-pods" not in self.faults:
                pod.events.append(f"FailedPrepareDynamicResources: claim {name} is in use by {sorted(others)}")
                return
            if not claim.cpus:
                cpus = self._allocate(claim)
                if cpus is None:
                    pod.events.append(f"FailedScheduling: cannot allocate all claims (claim {name})")
                    return
                claim.cpus = cpus
        if pod.claims and not self._driver_up:
            pod.events.append("FailedPrepareDynamicResources: driver dra.cpu is not registered")
            return
        configured = [n for n in pod.claims if self._claims[n].spec.opaque]
        if configured and "ignore-opaque-config" not in self.faults:
            why = "invalid argument" if "vague-config-refusal" in self.faults else \
                "status.allocation.devices.config[0].opaque.parameters: not a configuration this driver knows"
            pod.events.append(f"FailedPrepareDynamicResources: Failed to prepare dynamic resources: claim "
                              f"{configured[0]}: {why}")
            return
        conflict = self._pin_conflict(pod)
        if conflict:
            pod.events.append(f"FailedPrepareDynamicResources: CPUs {sorted(conflict)} are pinned by the kubelet's "
                              "static CPU manager policy")
            return
        if pod.claims and self._would_empty_pool(pod) and "empty-the-pool" not in self.faults:
            # fail closed, as dra-driver-cpu does since #297: the container that would empty the pool is refused
            pod.events.append("Failed: CreateContainerError: allocating the claim's CPUs would leave the shared "
                              "pool empty while shared containers run")
            return
        for name in pod.claims:
            self._claims[name].reserved_for.add(pod.spec.name)
        if pod.claims:
            self._prepare_calls.append(0.5 if "slow-prepare" in self.faults else 0.01)
        self._pin(pod)
        for container in pod.spec.containers:
            cid = f"{next(self._ids):064x}"
            pod.containers[container.name] = ContainerState(container.name, cid, True, 0,
                                                            self._consumed(pod, container.name))
            self._record("create", cid, self._cpus_for(pod, container.name), pod.spec.name, container.name)
        if pod.claims:
            self._update_shared()

    # -- DraSession ------------------------------------------------------------------------------
    def create_pod(self, pod: PodSpec, *, wait: bool = True, timeout: float = 120,
                   refusal_grace: float | None = REFUSAL_GRACE_S) -> PodState:  # noqa: ARG002 - decided at once
        if pod.name in self._pods:
            raise ValueError(f"pod {pod.name} exists")
        for spec in pod.claims:
            name = f"{pod.name}-{spec.name}" if spec.template else spec.name
            self._claims[name] = _Claim(spec, name, uid=f"uid-{name}")
        names = tuple(f"{pod.name}-{c.name}" if c.template else c.name for c in pod.claims) + pod.existing_claims
        state = _Pod(pod, f"uid-{pod.name}", names)
        self._pods[pod.name] = state
        self._try_start(state)
        if wait and not self.pod(pod.name).running:
            raise TimeoutError(f"pod {pod.name} not running after {timeout} s: {state.events}")
        return self.pod(pod.name)

    def pod(self, name: str) -> PodState:
        p = self._pods[name]
        containers = tuple(p.containers.get(c.name, ContainerState(c.name, "", False, 0, self._consumed(p, c.name)))
                           for c in p.spec.containers)
        running = all(c.running for c in containers)
        return PodState(name, p.uid, "Running" if running else "Pending", containers, p.claims, tuple(p.events),
                        0.2 if running else None)

    def _release(self, pod: _Pod) -> None:
        for state in pod.containers.values():
            pod.containers[state.name] = replace(state, running=False)
        for name in pod.claims:
            claim = self._claims.get(name)
            if claim:
                claim.reserved_for.discard(pod.spec.name)
        for c in pod.spec.containers:
            self._pinned.pop((pod.spec.name, c.name), None)
        for spec in pod.spec.claims:
            self._claims.pop(f"{pod.spec.name}-{spec.name}" if spec.template else spec.name, None)

    def delete_pod(self, name: str, *, timeout: float = 120) -> None:
        pod = self._pods.pop(name, None)
        if pod is None:
            return
        if not self._kubelet_up:
            self._deleted_while_down = [*getattr(self, "_deleted_while_down", []), pod]
            return
        self._release(pod)
        self._update_shared()

    def delete_pods(self, names, *, timeout: float = 120) -> None:
        for name in names:
            self.delete_pod(name, timeout=timeout)

    def allocation(self, claim: str) -> Allocation:
        c = self._claims[claim]
        if self.device_mode == "grouped":
            nodes = sorted({self.topology.by_id[n].node for n in c.cpus})
            shares = tuple((f"numa{n}", c.spec.count) for n in nodes)  # the scheduler's: the count asked for
            return Allocation(claim, bool(c.cpus), tuple(d for d, _ in shares), frozenset(),
                              tuple(sorted(c.reserved_for)), shares)
        return Allocation(claim, bool(c.cpus), tuple(f"cpu{n}" for n in sorted(c.cpus)), c.cpus,
                          tuple(sorted(c.reserved_for)))

    def slices(self) -> tuple[Device, ...]:
        by_id = self.topology.by_id
        if self.device_mode == "grouped":
            published = self._publish()
            return tuple(Device(f"numa{n}", None, n, by_id[min(cpus)].package, None, capacity=len(cpus & published))
                         for n, cpus in sorted(self.topology.node_cpus.items()) if cpus & published)
        return tuple(Device(f"cpu{c}", c, by_id[c].node, by_id[c].package, by_id[c].core)
                     for c in sorted(self._publish()))

    def cpuset_records(self) -> tuple[Record, ...]:
        return tuple(self._records)

    def running_container_ids(self) -> frozenset[str]:
        return frozenset(s.container_id for p in self._pods.values() for s in p.containers.values() if s.running)

    def restart_kubelet(self, hard: bool = True) -> None:
        if "reprepare-on-kubelet-restart" in self.faults:
            for claim in self._claims.values():
                if claim.reserved_for:  # prepared again while its old CPUs still count as taken: other CPUs
                    claim.cpus = self._allocate(_Claim(claim.spec, claim.name)) or claim.cpus
            for pod in self._pods.values():
                for state in pod.containers.values():
                    if pod.claims:
                        self._record("update", state.container_id, self._cpus_for(pod, state.name), pod.spec.name,
                                     state.name)

    def stop_kubelet(self) -> None:
        self._kubelet_up = False

    def start_kubelet(self) -> None:
        self._kubelet_up = True
        for pod in getattr(self, "_deleted_while_down", []):
            if "leak-on-delete" in self.faults:
                for state in pod.containers.values():
                    pod.containers[state.name] = replace(state, running=False)
            else:
                self._release(pod)
        self._deleted_while_down = []
        self._update_shared()
        for pod in self._pods.values():
            self._try_start(pod)

    def restart_driver(self, hard: bool = True) -> None:
        if "forget-on-driver-restart" in self.faults:
            self._forgotten = self._granted()
        self._update_shared()

    def stop_driver(self) -> None:
        self._driver_up = False

    def start_driver(self) -> None:
        if "forget-on-driver-restart" in self.faults:  # a new driver process starts with nothing in memory
            self._forgotten = self._granted()
        self._driver_up = True
        self._update_shared()
        for pod in self._pods.values():
            self._try_start(pod)

    def stop_container(self, pod: str, container: str) -> None:
        p = self._pods[pod]
        old = p.containers[container]
        cid = f"{next(self._ids):064x}"
        if "release-on-stop" in self.faults and p.claims:
            lent = self._cpus_for(p, container) or frozenset()
            for other in self._pods.values():
                for state in other.containers.values():
                    if not other.claims and state.running:
                        self._record("update", state.container_id, self._pool() | lent, other.spec.name, state.name)
        p.containers[container] = ContainerState(container, cid, True, old.restart_count + 1, old.claims)
        self._record("create", cid, self._cpus_for(p, container), pod, container)
        self._update_shared()  # the restarted container's create takes its claim back from the pool

    def effective_cpus(self, pod: str, container: str) -> CPUs:
        raise NotImplementedError("the fake node has no cgroups (cpuset-effective)")

    def checkpoints(self) -> KubeletCheckpoints:
        prepared = tuple(PreparedClaim(c.uid, c.name, "default", frozenset(f"uid-{p}" for p in c.reserved_for),
                                       tuple((self.driver_name, self.node, f"cpu{n}") for n in sorted(c.cpus)))
                         for c in self._claims.values() if c.reserved_for)
        assigned = tuple((f"uid-{pod}", c, cpus) for (pod, c), cpus in sorted(self._pinned.items()))
        return KubeletCheckpoints(prepared, CpuManagerView(self.profile.policy, frozenset(), assigned))

    def metrics(self) -> KubeletMetrics:
        def hist(values: list[float]) -> Histogram:
            buckets = tuple((b, sum(1 for v in values if v <= b)) for b in BUCKETS) + ((float("inf"), len(values)),)
            return Histogram("fake", buckets, len(values), sum(values))
        return KubeletMetrics(hist(self._prepare_calls), hist(self._prepare_calls), self.host_load_per_cpu)

    def collect_evidence(self, dest: Path) -> list[Path]:
        dest.mkdir(parents=True, exist_ok=True)
        path = dest / "fake-records.txt"
        path.write_text("\n".join(repr(r) for r in self._records))
        return [path]

    def close(self) -> None:
        self._pods.clear()
        self._claims.clear()
