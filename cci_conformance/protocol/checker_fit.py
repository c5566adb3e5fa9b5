"""Which counts a core group could get from a set of CPUs under the hard rules of docs/spec.md §2 (for the checker).

Each answer is a bit mask of counts (bit k set: some placement of exactly k CPUs exists), computed by a
subset-sum over whole cores, so hybrid machines (cores of 1 and 2 threads) are exact too. Proven against
an exhaustive enumeration of every cpuset in tests/unit/test_semantics_oracle.py.
"""

from __future__ import annotations

from ..cpuset import CPUs
from ..topology.model import Topology


def _below(n: int) -> int:
    """The mask of every count 0..n."""
    return (1 << (n + 1)) - 1


def _subset_sums(sizes: list[int], limit: int) -> int:
    mask = 1
    for s in sizes:
        mask |= mask << s
    return mask & _below(limit)


def _combine(a: int, b: int, limit: int) -> int:
    """Counts reachable by one part from ``a`` plus one part from ``b``."""
    out, k = 0, 0
    while b >> k:
        if (b >> k) & 1:
            out |= a << k
        k += 1
    return out & _below(limit)


def node_counts(topology: Topology, pool: CPUs, siblings: str, node: int) -> int:
    """Counts one NUMA node can give from ``pool``: any number of its CPUs (PREFERRED), one thread per core
    whose threads are all in the pool (DENIED, S2.4), or a sum of such whole cores (REQUIRED)."""
    mine = pool & topology.node_cpus.get(node, frozenset())
    whole = [core for core in topology.cores if core <= mine]
    if siblings == "required":
        return _subset_sums([len(c) for c in whole], len(mine))
    if siblings == "denied":
        return _below(len(whole))
    return _below(len(mine))


def counts(topology: Topology, pool: CPUs, siblings: str, nodes=None, spread: bool = False) -> int:
    """Counts a group can get from ``pool`` on ``nodes`` (default: every node with CPUs); with ``spread``
    every one of those nodes must give at least one CPU (S2.6)."""
    nodes = list(topology.node_cpus) if nodes is None else list(nodes)
    limit = len(pool)
    total = 1
    for nd in nodes:
        mask = node_counts(topology, pool, siblings, nd)
        if spread:
            mask &= ~1
        total = _combine(total, mask, limit)
    return total


def fits(topology: Topology, pool: CPUs, siblings: str, n: int, nodes=None, spread: bool = False) -> bool:
    return n >= 0 and bool(counts(topology, pool, siblings, nodes, spread) >> n & 1)


def fits_one_node(topology: Topology, pool: CPUs, siblings: str, n: int, nodes=None) -> bool:
    """Whether one node (of ``nodes``) alone can hold the group (S2.5, S2.7)."""
    return any(fits(topology, pool, siblings, n, [nd]) for nd in (list(topology.node_cpus) if nodes is None
                                                                   else nodes))


def packs(topology: Topology, pool: CPUs, n: int) -> bool:
    """Whether ``n`` CPUs of ``pool`` can be taken splitting at most one core (S2.4: a split core is one the
    grant touches without holding every thread of it)."""
    if n < 0 or n > len(pool):
        return False
    whole = [len(c) for c in topology.cores if c <= pool]
    if _subset_sums(whole, n) >> n & 1:
        return True
    # One split core gives 1..(its threads in the pool), less than all of a whole core; the rest are whole cores.
    kinds = {(len(core), len(core & pool)) for core in topology.cores if core & pool}  # alike cores: one try
    for size, inside in kinds:
        rest = list(whole)
        if inside == size:  # a whole core split: it gives at most all but one of its threads
            rest.remove(size)
            inside -= 1
        sums = _subset_sums(rest, n)
        if any(sums >> (n - r) & 1 for r in range(1, min(inside, n) + 1)):
            return True
    return False
