"""The harness's cross-checks of what the contract reports: snapshot, cpu_manager_state and pod-resources agree.

They read only contract values (NodeSnapshot, the pod-resources answers, the kubelet's cpu_manager_state in
its upstream format), so the same checks judge every backend; no backend checks itself (docs/architecture.md).
"""

from __future__ import annotations

from ..cpu_manager_state import CPUManagerStateError, loads
from ..cpuset import CPUs, format_cpulist
from ..node.api import NodeSnapshot


def _fmt(cpus: CPUs) -> str:
    return repr(format_cpulist(cpus))


def check_snapshot(snap: NodeSnapshot, strict_reservation: bool = False) -> list[str]:
    """The store's invariants as seen from outside (docs/spec.md S3.2); returns the problems found."""
    problems = []
    seen: dict[int, str] = {}
    for key, cpus in snap.exclusive.items():
        for cpu in cpus:
            if cpu in seen:
                problems.append(f"CPU {cpu} held by both {seen[cpu]} and {key}")
            seen[cpu] = key
        if cpus & snap.reserved:
            problems.append(f"{key} holds reserved CPUs {_fmt(cpus & snap.reserved)}")
        if not cpus <= snap.online:
            problems.append(f"{key} holds offline CPUs {_fmt(cpus - snap.online)}")
    held = frozenset(seen)
    want_pool = snap.online - held - (snap.reserved if strict_reservation else frozenset())
    if snap.shared_pool != want_pool:
        problems.append(f"shared pool {_fmt(snap.shared_pool)} != online − held − reserved(strict) {_fmt(want_pool)}")
    for c in snap.containers:
        key = f"{c.pod_uid}/{c.container}"
        if not c.running:
            if key in snap.exclusive:
                problems.append(f"stopped container {key} still holds {_fmt(snap.exclusive[key])}")
            continue
        if c.runtime_cpus != c.store_cpus:
            problems.append(f"{key}: runtime cpuset {_fmt(c.runtime_cpus)} != store {_fmt(c.store_cpus)}")
        if c.source == "shared" and c.store_cpus != snap.shared_pool:
            problems.append(f"{key}: shared container runs on {_fmt(c.store_cpus)}, pool is {_fmt(snap.shared_pool)}")
        if c.source == "static" and c.store_cpus != snap.exclusive.get(key):
            problems.append(f"{key}: static container runs on {_fmt(c.store_cpus)}, holds "
                            f"{_fmt(snap.exclusive.get(key, frozenset()))}")
        others = held - snap.exclusive.get(key, frozenset())
        if c.store_cpus & others:
            problems.append(f"{key} runs on CPUs held by others: {_fmt(c.store_cpus & others)}")
    return problems


def check_cpu_manager_state(raw: bytes, snap: NodeSnapshot, policy: str) -> list[str]:
    """The kubelet file agrees with the store (docs/spec.md S3.5)."""
    try:
        state = loads(raw, policy_name=policy)
    except CPUManagerStateError as exc:
        return [str(exc)]
    if policy == "none":
        return [] if (not state.default_cpuset and not state.entries) else ["policy none file has assignments"]
    entries = {f"{pod}/{name}": cpus for pod, cs in state.entries.items() for name, cpus in cs.items()}
    problems = []
    if entries != snap.exclusive:
        problems.append(f"cpu_manager_state entries {entries} != store holdings {snap.exclusive}")
    if state.default_cpuset != snap.shared_pool:
        problems.append(f"defaultCpuSet {_fmt(state.default_cpuset)} != shared pool {_fmt(snap.shared_pool)}")
    return problems


def check_pod_resources(listed: dict[str, CPUs], allocatable: CPUs, snap: NodeSnapshot) -> list[str]:
    """pod-resources List/GetAllocatableResources match the store (docs/spec.md S3.7)."""
    by_key = {f"{c.pod_uid}/{c.container}": f"{c.namespace}/{c.pod_name}/{c.container}" for c in snap.containers}
    want = {by_key[k]: v for k, v in snap.exclusive.items()}
    problems = []
    if listed != want:
        problems.append(f"pod-resources List {listed} != store {want}")
    if allocatable != snap.online - snap.reserved:
        problems.append(f"allocatable {_fmt(allocatable)} != online − reserved")
    return problems

