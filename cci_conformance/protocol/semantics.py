"""An independent checker of admission replies against docs/spec.md §2 (its own parameter reader, no driver code)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..cpuset import CPUs, format_cpulist, parse_cpulist
from ..topology.model import Topology
from .checker_fit import counts, fits, fits_one_node, packs
from .checker_params import ClaimRules, GroupRules, ParamError, as_rules

# The checker reads the claim parameters with checker_params (written from spec S2.1), never with
# protocol/claims.py or the driver SDK, and decides attainability with checker_fit, not the reference
# placement's formulas; tests/unit/test_semantics_oracle.py proves both against an exhaustive oracle.


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


def withheld_cpus(topology: Topology, claim, groups: Sequence[GroupReply]) -> CPUs:
    """CPUs nobody else may get while this admission lives (S2.4, S2.9): exclusive groups' CPUs and, for
    CORE-SIBLING-DENIED groups, every thread of their cores. ``claim``: the parameters (or ClaimRules)."""
    out: set[int] = set()
    for spec, reply in zip(as_rules(claim).groups, groups, strict=False):
        if spec.exclusive:
            out |= reply.cpus
            if spec.siblings == "denied":
                out |= frozenset().union(*touched_cores(topology, reply.cpus))
    return frozenset(out)


def _denied_siblings(topology: Topology, spec: GroupRules, reply: GroupReply) -> CPUs:
    if spec.siblings != "denied":
        return frozenset()
    return frozenset().union(*touched_cores(topology, reply.cpus)) - reply.cpus


# ---- the checker ----
def check_admission(claim, topology: Topology, available: CPUs, response_groups: Sequence[GroupReply],
                    *, rset_cpuset: CPUs | None = None, rset_exclusive: bool | None = None,
                    held_by_others: CPUs = frozenset()) -> list[Violation]:
    """Every §2 rule the reply breaks. ``claim``: the claim parameters (JSON text or dict; a ClaimRules or an
    already parsed claim is accepted too). ``available`` is the availableCpus sent; ``held_by_others`` the
    CPUs other live admissions withhold (see :func:`withheld_cpus`)."""
    try:
        rules = as_rules(claim)
    except ParamError as exc:
        return [Violation("S2.1", None, f"parameters a driver must refuse were admitted: {exc}")]
    out: list[Violation] = []
    groups = list(response_groups)
    if len(groups) != len(rules.groups):
        return [Violation("S2.2", None, f"{len(groups)} groups returned for a claim of {len(rules.groups)} core "
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
    if rset_exclusive is not None and rset_exclusive != rules.exclusive:
        out.append(Violation("S2.2", None, f"rSet.exclusive is {rset_exclusive}, expected {rules.exclusive} "
                             "(true exactly when a group is EXCLUSIVE)"))
    for spec, reply in zip(rules.groups, groups, strict=True):
        pairs = [(s, r) for s, r in zip(rules.groups, groups, strict=True) if r is not reply]
        others = frozenset().union(*(r.cpus for _, r in pairs))
        others_withheld = withheld_cpus(topology, ClaimRules(tuple(s for s, _ in pairs)), [r for _, r in pairs])
        denied_by_others = frozenset().union(*(_denied_siblings(topology, s, r) for s, r in pairs))
        if reply.cpus & denied_by_others:  # S2.4: withheld from everyone, the container's other groups included
            out.append(Violation("S2.4", spec.index, f"CPUs {_fmt(reply.cpus & denied_by_others)} are siblings "
                                 "another group of the claim withholds as CORE-SIBLING-DENIED"))
        free = (available & topology.online_cpus) - others - others_withheld
        out.extend(check_group(spec, topology, available, reply, free, held_by_others))
    return out


def check_group(spec: GroupRules, topology: Topology, available: CPUs, reply: GroupReply, free: CPUs,
                held_by_others: CPUs) -> list[Violation]:
    """The rules for one core group; ``free`` is what the group could have used (available minus the claim's
    other groups and their withheld siblings), used to judge whether a preference was attainable (S2.11)."""
    i, cpus, n = spec.index, reply.cpus, len(reply.cpus)
    out: list[Violation] = []

    def bad(rule: str, msg: str) -> None:
        out.append(Violation(rule, i, msg))

    if reply.exclusive != spec.exclusive:
        bad("S2.2", f"exclusive flag {reply.exclusive}, expected {spec.exclusive}")
    if not spec.min_count <= n <= spec.max_count:
        want = str(spec.min_count) if spec.min_count == spec.max_count else f"{spec.min_count}-{spec.max_count}"
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
    cpu_nodes = set(topology.node_cpus)
    device = topology.device(spec.device) if spec.device else None
    device_node = device.numa_node if device is not None and device.numa_node in cpu_nodes else None
    if spec.device_affinity != "none" and device_node is None:
        bad("S2.7", f"device {spec.device} is not on this machine or has no NUMA node with CPUs: a claim error, "
            "yet admitted")
    on_device = device_node is not None and node_set == {device_node}
    if spec.device_affinity == "required" and device_node is not None and not on_device and cpus:
        bad("S2.7", f"NUMA-DEVICE-AFFINITY-REQUIRED: CPUs on nodes {sorted(node_set)}, device {spec.device} is on "
            f"node {device_node}")
    if (spec.device_affinity == "preferred" and spec.mem != "interleave-required" and device_node is not None
            and not on_device
            and fits_one_node(topology, free, spec.siblings, n, [device_node])):
        bad("S2.7", f"NUMA-DEVICE-AFFINITY-PREFERRED: node {device_node} of device {spec.device} had room, but the "
            f"CPUs are on nodes {sorted(node_set)}")
    if spec.mem == "bind-required" and not single and cpus:
        bad("S2.5", f"NUMA-MEM-AFFINITY-BIND-REQUIRED: CPUs span nodes {sorted(node_set)}")
    if spec.mem == "bind-preferred" and not single and cpus and fits_one_node(topology, free, spec.siblings, n):
        bad("S2.5", f"NUMA-MEM-AFFINITY-BIND-PREFERRED: one node had room, but the CPUs span nodes {sorted(node_set)}")
    if spec.mem == "interleave-required" and node_set != cpu_nodes:
        bad("S2.6", f"NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED: CPUs on nodes {sorted(node_set)}, every node with CPUs "
            f"{sorted(cpu_nodes)} needed")
    # S2.7: device affinity beats an interleave preference, so the latter counts only where the former is unmet
    interleave_pref = spec.mem == "interleave-preferred" and spec.device_affinity != "required" and not on_device
    if interleave_pref and node_set != cpu_nodes and fits(topology, free, spec.siblings, n, spread=True):
        bad("S2.6", f"NUMA-MEM-AFFINITY-INTERLEAVE-PREFERRED: every node had room, but the CPUs are on nodes "
            f"{sorted(node_set)}")
    if spec.siblings == "preferred" and len(split) > 1:
        interleaved = spec.mem == "interleave-required" or (interleave_pref and node_set == cpu_nodes)
        for pool, part, where in _packing_domains(topology, spec, cpus, free, interleaved, on_device, device_node):
            mine = [c for c in split if c & part]
            if len(mine) > 1 and packs(topology, pool, len(part)):
                bad("S2.4", f"CORE-SIBLING-PREFERRED: {len(mine)} cores split ({', '.join(_fmt(c) for c in mine)}) "
                    f"although {where} could give {len(part)} CPUs splitting at most one core")
                break
    return out


def _packing_domains(topology: Topology, spec: GroupRules, cpus: CPUs, free: CPUs, interleaved: bool,
                     on_device: bool, device_node: int | None) -> list[tuple[CPUs, CPUs, str]]:
    """(pool, part of the grant, name) triples for the S2.4 packing rule: the part may split at most one core
    when the pool could give its size splitting at most one. The pools are what the group's NUMA and device
    rules let it use: per node for an interleaved grant (each node's part on its own), the device's node,
    any one node for a grant bound to one, else every free CPU of the machine."""
    if interleaved:
        return [(free & topology.node_cpus[nd], cpus & topology.node_cpus[nd], f"node {nd}")
                for nd in sorted(topology.node_cpus)]
    if spec.device_affinity == "required" or (spec.device_affinity == "preferred" and on_device):
        if device_node is None:
            return []
        return [(free & topology.node_cpus[device_node], cpus, f"node {device_node} of device {spec.device}")]
    if spec.mem == "bind-required" or (spec.mem == "bind-preferred" and len(nodes_of(topology, cpus)) == 1):
        return [(free & topology.node_cpus[nd], cpus, f"node {nd}") for nd in sorted(topology.node_cpus)]
    return [(free, cpus, "the machine")]


def check_response(claim, topology: Topology, available: CPUs, response,
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


def group_is_satisfiable(topology: Topology, free: CPUs, group) -> bool:
    """Whether a one-group claim can be met from ``free`` under the hard rules of §2, at some count of its
    range (S1.6: such a claim must not be refused). ``group``: a GroupRules, or the one-group parameters."""
    if not isinstance(group, GroupRules):
        group = as_rules(group).groups[0] if isinstance(group, (str, bytes, dict)) else \
            as_rules(_OneGroup(group)).groups[0]
    free = free & topology.online_cpus
    wanted = ((1 << (group.max_count + 1)) - 1) & ~((1 << group.min_count) - 1)
    if group.device_affinity == "required":
        dev = topology.device(group.device) if group.device else None
        if dev is None or dev.numa_node not in topology.node_cpus:
            return False
        return bool(counts(topology, free, group.siblings, [dev.numa_node]) & wanted)
    if group.mem == "interleave-required":
        return bool(counts(topology, free, group.siblings, spread=True) & wanted)
    if group.mem == "bind-required":
        return any(counts(topology, free, group.siblings, [nd]) & wanted for nd in topology.node_cpus)
    return bool(counts(topology, free, group.siblings) & wanted)


@dataclass(frozen=True)
class _OneGroup:
    """Wraps one already parsed group so :func:`as_rules` can copy it."""

    group: object

    @property
    def groups(self) -> tuple:
        return (self.group,)
