"""An independent checker of admission replies against docs/spec.md §2 (shares no code with any driver policy)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..cpuset import CPUs, format_cpulist, parse_cpulist
from ..topology.model import Topology
from .claims import ClaimRequest, CoreGroup


@dataclass(frozen=True)
class Violation:
    """One broken rule: ``rule`` is the docs/spec.md anchor, ``group`` the core-group index (None = whole reply)."""

    rule: str
    group: int | None
    message: str

    def __str__(self) -> str:
        where = "reply" if self.group is None else f"group {self.group}"
        return f"[{self.rule}] {where}: {self.message}"


@dataclass(frozen=True)
class GroupReply:
    """One ResourceSet of a reply."""

    cpus: CPUs
    exclusive: bool


def _fmt(cpus: Iterable[int]) -> str:
    return format_cpulist(cpus) or "(empty)"


def touched_cores(topology: Topology, cpus: CPUs) -> list[CPUs]:
    return list({topology.core_of[c] for c in cpus if c in topology.core_of})


def nodes_of(topology: Topology, cpus: CPUs) -> set[int]:
    return {topology.node_of[c] for c in cpus if c in topology.node_of}


def withheld_cpus(topology: Topology, claim: ClaimRequest, groups: Sequence[GroupReply]) -> CPUs:
    """CPUs nobody else may get while this admission lives (S2.4, S2.9): exclusive groups' CPUs and, for
    CORE-SIBLING-DENIED groups, every thread of their cores. The node leaves them out of later availableCpus."""
    out: set[int] = set()
    for spec, reply in zip(claim.groups, groups, strict=False):
        if not spec.exclusive:
            continue
        out |= reply.cpus
        if spec.siblings == "denied":
            for core in touched_cores(topology, reply.cpus):
                out |= core
    return frozenset(out)


# ---- what a group could get from a set of free CPUs (used to decide whether a preference was attainable) ----
def _whole_free_cores(topology: Topology, free: CPUs, node: int | None = None) -> list[CPUs]:
    return [core for core in topology.cores
            if core <= free and (node is None or topology.node_of[min(core)] == node)]


def capacity(topology: Topology, free: CPUs, siblings: str, node: int | None = None) -> int:
    """The most CPUs a group in this sibling mode can get from ``free`` (restricted to ``node`` if given)."""
    if siblings == "required":
        return sum(len(c) for c in _whole_free_cores(topology, free, node))
    if siblings == "denied":
        return len(_whole_free_cores(topology, free, node))
    return len(free if node is None else free & topology.node_cpus.get(node, frozenset()))


def can_place_on_one_node(topology: Topology, free: CPUs, group: CoreGroup, n: int, node: int | None = None) -> bool:
    nodes = [node] if node is not None else list(topology.node_cpus)
    return any(capacity(topology, free, group.siblings, nd) >= n for nd in nodes)


def can_interleave(topology: Topology, free: CPUs, group: CoreGroup, n: int) -> bool:
    unit = topology.threads_per_core if group.siblings == "required" else 1
    nodes = list(topology.node_cpus)
    caps = [capacity(topology, free, group.siblings, nd) // unit for nd in nodes]
    return n % unit == 0 and n // unit >= len(nodes) and min(caps, default=0) >= 1 and sum(caps) >= n // unit


# ---- the checker ----
def check_admission(claim: ClaimRequest, topology: Topology, available: CPUs, response_groups: Sequence[GroupReply],
                    *, rset_cpuset: CPUs | None = None, rset_exclusive: bool | None = None,
                    held_by_others: CPUs = frozenset()) -> list[Violation]:
    """Every §2 rule the reply breaks. ``available`` is the availableCpus sent; ``held_by_others`` the CPUs
    other live admissions withhold (see :func:`withheld_cpus`)."""
    out: list[Violation] = []
    groups = list(response_groups)
    if len(groups) != len(claim.groups):
        return [Violation("S2.2", None, f"{len(groups)} groups returned for a claim of {len(claim.groups)} core "
                          "groups (AdmitResponse.groups must hold one ResourceSet per core group)")]
    union: set[int] = set()
    for i, a in enumerate(groups):
        for b in groups[i + 1:]:
            if a.cpus & b.cpus:
                out.append(Violation("S2.2", i, f"overlaps another group on {_fmt(a.cpus & b.cpus)}"))
        union |= a.cpus
    if rset_cpuset is not None and frozenset(union) != rset_cpuset:
        out.append(Violation("S2.2", None, f"rSet.cpuset {_fmt(rset_cpuset)} is not the union of the groups "
                             f"{_fmt(union)}"))
    if rset_exclusive is not None and rset_exclusive != claim.exclusive:
        out.append(Violation("S2.2", None, f"rSet.exclusive is {rset_exclusive}, expected {claim.exclusive} "
                             "(true exactly when a group is EXCLUSIVE)"))
    for spec, reply in zip(claim.groups, groups, strict=True):
        pairs = [(s, r) for s, r in zip(claim.groups, groups, strict=True) if r is not reply]
        others = frozenset().union(*(r.cpus for _, r in pairs))
        others_withheld = withheld_cpus(topology, ClaimRequest(tuple(s for s, _ in pairs)), [r for _, r in pairs])
        free = (available & topology.online_cpus) - others - others_withheld
        out.extend(check_group(spec, topology, available, reply, free, held_by_others))
    return out


def check_group(spec: CoreGroup, topology: Topology, available: CPUs, reply: GroupReply, free: CPUs,
                held_by_others: CPUs) -> list[Violation]:
    """The rules for one core group; ``free`` is what the group could have used (available minus the claim's
    other groups), used to judge whether a preference was attainable."""
    i, cpus, n = spec.index, reply.cpus, len(reply.cpus)
    out: list[Violation] = []

    def bad(rule: str, msg: str) -> None:
        out.append(Violation(rule, i, msg))

    if reply.exclusive != spec.exclusive:
        bad("S2.2", f"exclusive flag {reply.exclusive}, expected {spec.exclusive}")
    if not spec.min_count <= n <= spec.max_count:
        want = str(spec.min_count) if not spec.is_range else f"{spec.min_count}-{spec.max_count}"
        bad("S2.3", f"{n} CPUs ({_fmt(cpus)}) returned, {want} asked (cores counts logical CPUs)")
    if not cpus <= topology.online_cpus:
        bad("S2.3", f"CPUs {_fmt(cpus - topology.online_cpus)} are not online CPUs of this machine")
    if not cpus <= available:
        bad("S2.3", f"CPUs {_fmt(cpus - available)} are not in availableCpus")
    if cpus & held_by_others:
        bad("S2.9", f"CPUs {_fmt(cpus & held_by_others)} are withheld by another live admission")
    cores = touched_cores(topology, cpus)
    split = [c for c in cores if not c <= cpus]
    if spec.siblings == "required" and split:
        bad("S2.4", f"CORE-SIBLING-REQUIRED but cores {', '.join(_fmt(c) for c in split)} are only partly included")
    if spec.siblings == "denied":
        doubled = [c for c in cores if len(c & cpus) > 1]
        if doubled:
            bad("S2.4", f"CORE-SIBLING-DENIED but cores {', '.join(_fmt(c) for c in doubled)} give more than one "
                "thread")
        siblings = frozenset().union(*cores) - cpus if cores else frozenset()
        if not siblings <= available:
            bad("S2.4", f"CORE-SIBLING-DENIED but the siblings {_fmt(siblings - available)} were not free to withhold")
    node_set = nodes_of(topology, cpus)
    single = len(node_set) == 1
    if spec.siblings == "preferred" and single and len(split) > 1:
        node = next(iter(node_set))
        whole = _whole_free_cores(topology, free, node)
        if sum(len(c) for c in whole) >= n:
            bad("S2.4", f"CORE-SIBLING-PREFERRED: {len(split)} cores split although node {node} had {len(whole)} "
                "whole free cores (at most one core may be split)")
    device_node = topology.device(spec.device).numa_node if spec.device and topology.device(spec.device) else None
    if spec.device_affinity == "required" and device_node is not None and node_set - {device_node}:
        bad("S2.7", f"NUMA-DEVICE-AFFINITY-REQUIRED: CPUs on nodes {sorted(node_set)}, device {spec.device} is on "
            f"node {device_node}")
    if (spec.device_affinity == "preferred" and spec.mem != "interleave-required" and device_node is not None
            and node_set - {device_node}
            and can_place_on_one_node(topology, free, spec, n, device_node)):
        bad("S2.7", f"NUMA-DEVICE-AFFINITY-PREFERRED: node {device_node} of device {spec.device} had room, but the "
            f"CPUs are on nodes {sorted(node_set)}")
    if spec.mem == "bind-required" and not single and cpus:
        bad("S2.5", f"NUMA-MEM-AFFINITY-BIND-REQUIRED: CPUs span nodes {sorted(node_set)}")
    if spec.mem == "bind-preferred" and not single and cpus and can_place_on_one_node(topology, free, spec, n):
        bad("S2.5", f"NUMA-MEM-AFFINITY-BIND-PREFERRED: one node had room, but the CPUs span nodes {sorted(node_set)}")
    cpu_nodes = set(topology.node_cpus)
    if spec.mem == "interleave-required" and node_set != cpu_nodes:
        bad("S2.6", f"NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED: CPUs on nodes {sorted(node_set)}, every node with CPUs "
            f"{sorted(cpu_nodes)} needed")
    if (spec.mem == "interleave-preferred" and node_set != cpu_nodes and spec.device_affinity == "none"
            and can_interleave(topology, free, spec, n)):
        bad("S2.6", f"NUMA-MEM-AFFINITY-INTERLEAVE-PREFERRED: every node had room, but the CPUs are on nodes "
            f"{sorted(node_set)}")
    return out


def check_response(claim: ClaimRequest, topology: Topology, available: CPUs, response,
                   held_by_others: CPUs = frozenset()) -> list[Violation]:
    """Check a successful ``cci.v1alpha1.AdmitResponse`` (an error reply is a violation here)."""
    if response.err:
        return [Violation("S1.6", None, f"admission refused: {response.err}")]
    rset = parse_cpulist(response.rSet.cpuset)
    groups = reply_groups(response)  # a driver that omits `groups` is read as one group (S2.2)
    return check_admission(claim, topology, available, groups, rset_cpuset=rset,
                           rset_exclusive=response.rSet.exclusive, held_by_others=held_by_others)


def reply_groups(response) -> list[GroupReply]:
    """The groups of a reply as GroupReply values (one group = rSet when ``groups`` is omitted)."""
    if response.groups:
        return [GroupReply(parse_cpulist(g.cpuset), g.exclusive) for g in response.groups]
    return [GroupReply(parse_cpulist(response.rSet.cpuset), response.rSet.exclusive)]


def group_is_satisfiable(topology: Topology, free: CPUs, group: CoreGroup) -> bool:
    """Whether a one-group claim can be met from ``free`` (S1.6: such a claim must not be refused).

    Exact for the hard constraints of §2; for a range, its lower bound counts."""
    free = free & topology.online_cpus
    n = group.min_count
    if group.siblings == "required":
        unit = topology.threads_per_core
        n = next((k for k in range(group.min_count, group.max_count + 1) if k % unit == 0), None)
        if n is None:
            return False
    if group.mem == "interleave-required":
        return can_interleave(topology, free, group, n)
    if group.device_affinity == "required" and group.device:
        dev = topology.device(group.device)
        return dev is not None and capacity(topology, free, group.siblings, dev.numa_node) >= n
    if group.mem == "bind-required":
        return can_place_on_one_node(topology, free, group, n)
    return capacity(topology, free, group.siblings) >= n
