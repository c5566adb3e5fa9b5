"""The reference CCI policy: honours every attribute of docs/spec.md §2 with best-fit placement."""

from __future__ import annotations

from cci_conformance.cpuset import CPUs, format_cpulist
from cci_conformance.driver_sdk import Policy, PolicyError
from cci_conformance.protocol.capabilities import KNOWN_CAPABILITIES
from cci_conformance.protocol.claims import ClaimRequest, CoreGroup
from cci_conformance.topology.model import Topology

from .placement import NoFit, Placer


class ReferencePolicy(Policy):
    """Every step is a method so a mutant driver is a short subclass breaking one rule."""

    capabilities = tuple(KNOWN_CAPABILITIES)

    def __init__(self, topology: Topology):
        super().__init__(topology)
        self.placer = Placer(topology)

    def choose_cpus(self, claim: ClaimRequest, usable: CPUs) -> list[CPUs]:
        # Exclusive groups first: they are the most constrained and must not land on the shared ones (S2.2).
        order = sorted(claim.groups, key=lambda g: (not g.exclusive, g.index))
        chosen: dict[int, CPUs] = {}
        free = usable
        for group in order:
            cpus = self.choose_group(group, free)
            chosen[group.index] = cpus
            # Groups are pairwise disjoint; DENIED siblings are off-limits to the claim's other groups too.
            free = free - self.withheld_for(group, cpus) - cpus
        return [chosen[g.index] for g in claim.groups]

    def choose_group(self, group: CoreGroup, free: CPUs) -> CPUs:
        """Try the plans the group's attributes allow, in preference order (spec S2.5-S2.7)."""
        unit = self.topology.threads_per_core if group.siblings == "required" else 1
        # where cores differ in size, whole cores can add up to any count of a range, not only multiples of t
        for count in self.counts(group, 1 if self.placer.mixed_cores else unit):
            for plan, nodes in self.plans(group):
                try:
                    if plan == "spread":
                        return self.placer.take_spread(nodes, free, count, group.siblings, unit)
                    if plan == "single":
                        return self.placer.take_single(nodes, free, count, group.siblings)
                    return self.placer.take_any(nodes, free, count, group.siblings, unit)
                except NoFit:
                    continue
        raise PolicyError(self.refusal(group, free))

    def counts(self, group: CoreGroup, unit: int) -> list[int]:
        """Exact count, or for a range every allowed count from the largest down (S2.8)."""
        return [n for n in range(group.max_count, group.min_count - 1, -1) if n % unit == 0]

    def plans(self, group: CoreGroup) -> list[tuple[str, list[int]]]:
        """Placement plans in preference order: hard constraints filter, preferences order (S2.5-S2.7)."""
        nodes = list(self.placer.cpu_nodes)
        if group.mem == "interleave-required":  # a required interleave outranks a device preference (S2.7)
            return [("spread", nodes)]
        plans: list[tuple[str, list[int]]] = []
        if group.device is not None and group.device_affinity in ("required", "preferred"):
            plans.append(("single", [self.topology.device(group.device).numa_node]))
        if group.device_affinity == "required":
            return plans
        if group.mem == "interleave-preferred":
            plans.append(("spread", nodes))
        if group.mem.startswith("bind"):
            plans.append(("single", nodes))
        if group.mem != "bind-required":
            plans.append(("any", nodes))
        return plans

    def refusal(self, group: CoreGroup, free: CPUs) -> str:
        want = str(group.count) if not group.is_range else f"{group.min_count}-{group.max_count}"
        return (f"core group {group.index}: cannot place {want} CPUs (exclusive={group.exclusive}, "
                f"siblings={group.siblings}, mem={group.mem}, device={group.device or '-'} "
                f"{group.device_affinity}) in the {len(free)} usable CPUs {format_cpulist(free) or '(none)'}")
