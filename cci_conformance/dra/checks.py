"""What the DRA suites read off a session: current cpusets, the shared pool's expected set, overlaps, cores."""

from __future__ import annotations

from ..cpuset import CPUs, format_cpulist
from ..kind.cluster.cpuset_log import EVERY_CPU, Record
from ..topology.model import Topology
from .api import Allocation, DraSession, PodState


def fmt(cpus: CPUs | None) -> str:
    return "every CPU (no cpuset)" if cpus is None else (format_cpulist(cpus) or "(none)")


def current_cpus(records: tuple[Record, ...], container_id: str) -> CPUs | None:
    """What the runtime last set for the container: its create's cpuset, then any non-empty update after it."""
    last: CPUs | None = EVERY_CPU
    for r in records:
        if r.container_id == container_id and (r.op == "create" or r.cpus):
            last = r.cpus
    return last


def creates(records: tuple[Record, ...], pod: str, container: str) -> list[Record]:
    return [r for r in records
            if r.op == "create" and r.kind == "container" and (r.pod, r.container) == (pod, container)]


def claim_cpus(session: DraSession, pod: PodState) -> CPUs:
    """Every CPU the pod's claims hold. Individual mode: the CPUs of the allocated devices (API server). Grouped
    mode: the CPUs the driver picked at prepare time, which only the runtime's cpusets of the containers show
    (grouped_cpus). A claim without an allocation of the driver's devices, or with a device whose CPU its
    ResourceSlices do not name, fails the test that asked: an empty set would let "disjoint", "whole cores" and
    "not in the pool" hold for nothing (a false pass)."""
    cpus: set[int] = set()
    grouped: dict[str, Allocation] = {}
    for claim in pod.claims:
        allocation = session.allocation(claim)
        if not allocation.allocated or not allocation.devices:
            raise AssertionError(f"claim {claim} of pod {pod.name} has no allocation of the driver's devices")
        if allocation.shares:
            grouped[claim] = allocation
            continue
        if len(allocation.cpus) != len(allocation.devices):
            raise AssertionError(
                f"claim {claim} of pod {pod.name} holds devices {', '.join(allocation.devices)}, whose CPUs the "
                f"driver's ResourceSlices name as {fmt(allocation.cpus)}: every device must carry its CPU id "
                "(attribute cpuID in the driver's domain)")
        cpus |= allocation.cpus
    if grouped:
        cpus |= grouped_cpus(session, pod, grouped, frozenset(cpus))
    return frozenset(cpus)


def grouped_cpus(session: DraSession, pod: PodState, grouped: dict[str, Allocation], individual: CPUs) -> CPUs:
    """The CPUs of a pod's grouped-mode claims: each container consuming some MUST run on exactly as many CPUs as
    they consumed of their group devices (beside its individual claims' CPUs), all inside those devices' NUMA
    nodes. Anything else fails the test that asked: the count is what the claim asked for."""
    records = session.cpuset_records()
    node_of = {d.name: d.numa_node for d in session.slices() if d.capacity is not None}
    unused = [name for name in grouped if not any(name in c.claims for c in pod.containers)]
    if unused:
        raise AssertionError(f"grouped claims {unused} of pod {pod.name} are consumed by no container: their CPUs "
                             "show only in a container's cpuset")
    out: set[int] = set()
    for c in pod.containers:
        mine = [(n, grouped[n]) for n in c.claims if n in grouped]
        if not mine:
            continue
        have = current_cpus(records, c.container_id) if c.container_id else None
        shares = [(device, count) for _, a in mine for device, count in a.shares]
        told = ", ".join(f"{n}: {count} of {device}" for n, a in mine for device, count in a.shares)
        if not have:
            raise AssertionError(f"{pod.name}/{c.name} consumes grouped claims ({told}) but the runtime gave it "
                                 f"{fmt(have)}: a grouped claim's CPUs are the cpuset its containers get")
        picked = have - individual
        want = sum(count for _, count in shares)
        if len(picked) != want:
            raise AssertionError(f"{pod.name}/{c.name} runs on {fmt(have)}: {len(picked)} CPUs for grouped claims "
                                 f"that consumed {want} ({told})")
        nodes = {node_of.get(device) for device, _ in shares}
        if None in nodes:
            raise AssertionError(f"group devices {[d for d, _ in shares]} of {pod.name}/{c.name} carry no NUMA node "
                                 "attribute (numaNodeID in the driver's domain, or resource.kubernetes.io/numaNode)")
        inside = frozenset().union(*(session.topology.node_cpus.get(n, frozenset()) for n in nodes))
        if picked - inside:
            raise AssertionError(f"{pod.name}/{c.name} runs on {fmt(picked)} for {told}: {fmt(picked - inside)} lie "
                                 f"outside NUMA nodes {sorted(nodes)} of its group devices")
        out |= picked
    return frozenset(out)


def expected_pool(session: DraSession, grants: CPUs) -> CPUs:
    """The shared pool as it must be: online CPUs minus the reserved ones minus every live exclusive grant."""
    return session.topology.online_cpus - session.profile.reserved - grants


def pool_problems(session: DraSession, shared_pods: list[str], grants: CPUs) -> list[str]:
    """Each shared container whose current cpuset is not exactly the expected pool, with both sets."""
    want = expected_pool(session, grants)
    records = session.cpuset_records()
    problems = []
    for name in shared_pods:
        for c in session.pod(name).containers:
            have = current_cpus(records, c.container_id)
            if have != want:
                problems.append(f"{name}/{c.name} runs on {fmt(have)}; the pool is {fmt(want)} (online "
                                f"{fmt(session.topology.online_cpus)} - reserved {fmt(session.profile.reserved)} - "
                                f"grants {fmt(grants)})")
    return problems


def split_cores(topology: Topology, cpus: CPUs) -> list[CPUs]:
    """The cores ``cpus`` holds only in part."""
    return [core & cpus for core in topology.cores if core & cpus and not core <= cpus]


def overlaps_over_time(records: tuple[Record, ...], owners: dict[tuple[str, str], CPUs],
                       among: set[tuple[str, str]] | None = None) -> list[str]:
    """Every record (of the containers ``among``, default all) asking for CPUs another (pod, container) of ``owners``
    holds exclusively. Pass only records of the window in which the owners held them. A create without a cpuset
    (every CPU) overlaps all."""
    problems = []
    for r in records:
        if r.kind != "container" or (among is not None and (r.pod, r.container) not in among):
            continue
        if r.op == "update" and not r.cpus:
            continue
        for owner, cpus in owners.items():
            if owner == (r.pod, r.container):
                continue
            overlap = cpus if r.cpus is None else (r.cpus & cpus)
            if overlap:
                problems.append(f"record {r.index}: {r.pod}/{r.container} {r.op} asked for {fmt(r.cpus)}, "
                                f"overlapping {owner[0]}/{owner[1]}'s {fmt(overlap)}")
    return problems


# The driver's NRI plugin updates running containers after the runtime answers the kubelet: a pool check waits
# this long for the update before it judges.
SETTLE_S = 20.0


def settled(problems_now, timeout: float = SETTLE_S) -> list[str]:
    """``problems_now()`` once it is empty, or its last answer when ``timeout`` passed (a deadline, not a sleep)."""
    from ..waiting import WaitTimeout, wait_for

    last: list[list[str]] = [[]]

    def clean() -> bool:
        last[0] = problems_now()
        return not last[0]
    try:
        wait_for(clean, timeout=timeout, interval=0.5, what="the shared pool to settle")
    except WaitTimeout:
        pass
    return last[0]


def need_offered(session: DraSession, held: int, pinned: int = 0) -> None:
    """Not applicable on a machine whose CPUs offered to claims (online - reserved) cannot hold ``held`` CPUs in
    claims at once, ``pinned`` more pinned by the kubelet, and one CPU for the shared pool (docs/spec-dra.md S5.4):
    there, a correct driver's refusal would read as a failure."""
    from ..certify.outcomes import not_applicable

    online, reserved = session.topology.online_cpus, session.profile.reserved
    offered = len(online - reserved)
    if offered < held + pinned + 1:
        also = f", {pinned} pinned to a Guaranteed pod" if pinned else ""
        not_applicable(f"{session.topology.name} offers {offered} CPUs to claims (online {fmt(online)}, reserved "
                       f"{fmt(reserved) if reserved else 'none'}); this test holds {held} in claims at once{also} and "
                       f"the shared pool keeps one, so it needs {held + pinned + 1}")
