"""KEP-2902 ``distribute-cpus-across-numa``: takeByTopologyNUMADistributed of the kubelet's cpu_assignment.go."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from ...cpuset import CPUs
from .assignment import PACKED, AllocationError, _Accumulator, not_enough_cpus, take_by_topology_numa_packed
from .topology import CPUTopology


def _round3(x: float) -> float:
    """Go's ``math.Round(x*1000)/1000``: half away from zero (Python's round() is half-to-even)."""
    scaled = x * 1000
    return math.copysign(math.floor(abs(scaled) + 0.5), scaled) / 1000


def _std_dev(values: Sequence[int]) -> float:
    mean = _round3(sum(values) / len(values))
    return _round3(math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)))


def _combinations(items: Sequence[int], k: int):
    """n-choose-k subsets in the order iterateCombinations visits them."""
    if k < 1:
        return

    def helper(start: int, k: int, accum: list[int]):
        if k == 0:
            yield list(accum)
            return
        for i in range(start, len(items) - k + 1):
            yield from helper(i + 1, k - 1, [*accum, items[i]])

    yield from helper(0, k, [])


def _numa_range(acc: _Accumulator, group: int) -> tuple[int, int]:
    """rangeNUMANodesNeededToSatisfy: the fewest and most NUMA nodes worth trying."""
    num_numa = len(acc.topo.details.numa_nodes())
    num_numa_available = len(acc.details.numa_nodes())
    num_cpus = len(acc.topo.details)
    groups = (num_cpus - 1) // group + 1
    groups_per_numa = (groups - 1) // num_numa + 1
    groups_needed = (acc.needed - 1) // group + 1
    return (groups_needed - 1) // groups_per_numa + 1, min(groups_needed, num_numa_available)


def _best_remainder(
    combo: list[int], numas: list[int], after: dict[int, int], remainder: int, group: int
) -> tuple[float, list[int] | None]:
    """The subset of ``combo`` that takes the remainder groups with the lowest balance score."""
    best_balance, best_subset = math.inf, None
    if remainder == 0:
        return _std_dev([after[n] for n in numas]), None
    candidates = [n for n in combo if after[n] >= group]
    for k in range(len(candidates), 0, -1):
        for subset in _combinations(candidates, k):
            left = dict(after)
            rem = remainder
            if sum(left[n] for n in subset) < rem:
                continue
            while rem > 0:
                for n in subset:
                    if rem == 0:
                        break
                    if left[n] < group:
                        continue
                    left[n] -= group
                    rem -= group
            balance = _std_dev([left[n] for n in numas])
            if balance < best_balance:
                best_balance, best_subset = balance, subset
    return best_balance, best_subset


def take_by_topology_numa_distributed(
    topo: CPUTopology, available: Iterable[int], num_cpus: int, group_size: int, sorting: str = PACKED
) -> CPUs:
    """KEP-2902 ``distribute-cpus-across-numa``: spread evenly over the fewest NUMA nodes, in groups of
    ``group_size`` CPUs, keeping the leftover free CPUs balanced; falls back to packed otherwise."""
    available = frozenset(available)
    if num_cpus % group_size != 0:
        return take_by_topology_numa_packed(topo, available, num_cpus, sorting, False)
    acc = _Accumulator(topo, available, num_cpus, sorting)
    if acc.satisfied():
        return acc.result
    if acc.failed():
        raise not_enough_cpus(num_cpus, len(available))
    numas = acc.sorted_numa_nodes()
    free = {n: len(acc.details.cpus_in_numa_nodes(n)) for n in numas}
    lo, hi = _numa_range(acc, group_size)
    for k in range(lo, hi + 1):
        best_balance, best_remainder, best_combo = math.inf, None, None
        for combo in _combinations(numas, k):
            if best_balance == 0:
                break
            if sum(free[n] for n in combo) < num_cpus:
                continue
            if sum(free[n] // group_size for n in combo) * group_size < num_cpus:
                continue
            share = (num_cpus // len(combo) // group_size) * group_size
            if any(free[n] < share for n in combo):
                continue
            after = dict(free)
            for n in combo:
                after[n] -= share
            remainder = num_cpus - share * len(combo)
            balance, subset = _best_remainder(combo, numas, after, remainder, group_size)
            if balance < best_balance:
                best_balance, best_remainder, best_combo = balance, subset, combo
        if best_combo is None:
            continue
        share = (num_cpus // len(best_combo) // group_size) * group_size
        for n in best_combo:
            acc.take(take_by_topology_numa_packed(topo, acc.details.cpus_in_numa_nodes(n), share, sorting, False))
        remainder = num_cpus - share * len(best_combo)
        while remainder > 0:
            before = remainder
            for n in best_remainder or ():
                if remainder == 0:
                    break
                if len(acc.details.cpus_in_numa_nodes(n)) < group_size:
                    continue
                acc.take(take_by_topology_numa_packed(topo, acc.details.cpus_in_numa_nodes(n), group_size, sorting))
                remainder -= group_size
            if remainder == before:  # the kubelet would spin here; never reached when the scores were computed right
                break
        if acc.needed > 0:
            raise AllocationError(f"accounting error, not enough CPUs allocated, remaining: {acc.needed}")
        if acc.needed < 0:
            raise AllocationError(f"accounting error, too many CPUs allocated, remaining: {acc.needed}")
        return acc.result
    return take_by_topology_numa_packed(topo, available, num_cpus, sorting, False)
