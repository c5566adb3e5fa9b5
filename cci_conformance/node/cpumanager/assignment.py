"""The kubelet's best-fit CPU selection, takeByTopologyNUMAPacked, and its accumulator (cpu_assignment.go)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ...cpuset import CPUs
from .topology import CPUTopology

PACKED = "packed"  # CPUSortingStrategyPacked: the default
SPREAD = "spread"  # CPUSortingStrategySpread: with the distribute-cpus-across-cores option


class AllocationError(Exception):
    """The kubelet could not select the CPUs; ``str()`` is the kubelet's error text."""


def not_enough_cpus(requested: int, available: int) -> AllocationError:
    return AllocationError(
        f"not enough cpus available to satisfy request: requested={requested}, available={available}"
    )


class _Accumulator:
    """cpuAccumulator: the free CPUs still claimable (``details``), the result so far, and what is still needed."""

    def __init__(self, topo: CPUTopology, available: Iterable[int], num_cpus: int, sorting: str):
        self.topo = topo
        self.details = topo.details.keep_only(available)
        self.needed = num_cpus
        self.result: CPUs = frozenset()
        self.sorting = sorting
        # "If NUMA nodes map to 1 or more sockets, pull from NUMA nodes first" (newCPUAccumulator).
        self.numa_first = topo.num_sockets >= topo.num_numa_nodes

    # ---- bookkeeping ----
    def take(self, cpus: CPUs) -> None:
        self.result = self.result | cpus
        self.details = self.details.keep_only(self.details.cpus() - self.result)
        self.needed -= len(cpus)

    def needs_at_least(self, n: int) -> bool:
        return self.needed >= n

    def satisfied(self) -> bool:
        return self.needed < 1

    def failed(self) -> bool:
        return self.needed > len(self.details)

    # ---- orderings (best fit: ascending free CPUs, ties by id; hierarchical) ----
    @staticmethod
    def _sort(ids: Iterable[int], free: Callable[..., CPUs]) -> list[int]:
        return sorted(ids, key=lambda i: (len(free(i)), i))

    def sorted_numa_nodes(self) -> list[int]:
        d = self.details
        if self.numa_first:
            return self._sort(d.numa_nodes(), d.cpus_in_numa_nodes)
        out: list[int] = []
        for socket in self.sorted_sockets():
            out += self._sort(d.numa_nodes_in_sockets(socket), d.cpus_in_numa_nodes)
        return out

    def sorted_sockets(self) -> list[int]:
        d = self.details
        if not self.numa_first:
            return self._sort(d.sockets(), d.cpus_in_sockets)
        out: list[int] = []
        for numa in self.sorted_numa_nodes():
            out += self._sort(d.sockets_in_numa_nodes(numa), d.cpus_in_sockets)
        return out

    def sorted_cores(self) -> list[int]:
        d = self.details
        out: list[int] = []
        if self.numa_first:
            for socket in self.sorted_sockets():
                out += self._sort(d.cores_in_sockets(socket), d.cpus_in_cores)
        else:
            for numa in self.sorted_numa_nodes():
                out += self._sort(d.cores_in_numa_nodes(numa), d.cpus_in_cores)
        return out

    def sorted_uncore_caches(self) -> list[int]:
        d = self.details
        out: list[int] = []
        for numa in self.sorted_numa_nodes():
            out += self._sort(d.uncore_in_numa_nodes(numa), d.cpus_in_uncore_caches)
        return out

    def sorted_cpus(self) -> list[int]:
        d = self.details
        out: list[int] = []
        if self.sorting == PACKED:
            for core in self.sorted_cores():
                out += sorted(d.cpus_in_cores(core))
        else:
            for socket in self.sorted_sockets():
                out += sorted(d.cpus_in_sockets(socket))
        return out

    # ---- which groups are completely free ----
    def free_numa_nodes(self) -> list[int]:
        full = self.topo.details.cpus_in_numa_nodes
        return [n for n in self.sorted_numa_nodes() if len(self.details.cpus_in_numa_nodes(n)) == len(full(n))]

    def free_sockets(self) -> list[int]:
        per = self.topo.cpus_per_socket
        return [s for s in self.sorted_sockets() if len(self.details.cpus_in_sockets(s)) == per]

    def free_uncore_caches(self) -> list[int]:
        full = self.topo.details.cpus_in_uncore_caches
        return [u for u in self.sorted_uncore_caches() if len(self.details.cpus_in_uncore_caches(u)) == len(full(u))]

    def free_cores(self) -> list[int]:
        # The kubelet's isCoreFree compares with CPUsPerCore() = NumCPUs / NumCores. On parts whose
        # cores have different thread counts (hybrid P+E, cores with an offline sibling) that integer
        # division calls a half-used P-core "free", and takeFullCores then claims its busy sibling
        # too: a double grant. We compare with the core's own size instead, which is the same test on
        # every homogeneous machine and never hands out an unavailable CPU (docs/cpumanager.md).
        full = self.topo.details.cpus_in_cores
        return [c for c in self.sorted_cores() if len(self.details.cpus_in_cores(c)) == len(full(c))]

    # ---- the steps ----
    def _take_whole(self, ids: list[int], cpus_of: Callable[..., CPUs]) -> None:
        for i in ids:
            cpus = cpus_of(i)
            if self.needs_at_least(len(cpus)):
                self.take(cpus)

    def take_full_numa_nodes(self) -> None:
        self._take_whole(self.free_numa_nodes(), self.topo.details.cpus_in_numa_nodes)

    def take_full_sockets(self) -> None:
        self._take_whole(self.free_sockets(), self.topo.details.cpus_in_sockets)

    def take_full_first_level(self) -> None:
        (self.take_full_numa_nodes if self.numa_first else self.take_full_sockets)()

    def take_full_second_level(self) -> None:
        (self.take_full_sockets if self.numa_first else self.take_full_numa_nodes)()

    def take_full_uncore(self) -> None:
        self._take_whole(self.free_uncore_caches(), self.topo.details.cpus_in_uncore_caches)

    def take_partial_uncore(self, uncore: int) -> None:
        per_core = self.topo.cpus_per_core
        cores_needed = (self.needed + per_core - 1) // per_core
        cores = self.details.cores_needed_in_uncore_cache(cores_needed, uncore)
        free = self.details.cpus_in_cores(*cores)
        # An odd remainder on an SMT machine needs one thread less than the cores found.
        if self.needed % 2 != 0 and per_core > 1:
            ordered = sorted(free)
            if len(ordered) > self.needed:
                ordered = ordered[: len(free) - 1]
            free = frozenset(ordered)
        if self.needed == len(free):
            self.take(free)

    def take_uncore_caches(self) -> None:
        per_uncore = self.topo.cpus_per_uncore
        for uncore in self.sorted_uncore_caches():
            if self.needs_at_least(per_uncore):
                self.take_full_uncore()
            if self.satisfied():
                return
            self.take_partial_uncore(uncore)
            if self.satisfied():
                return

    def take_full_cores(self) -> None:
        self._take_whole(self.free_cores(), self.topo.details.cpus_in_cores)

    def take_remaining_cpus(self) -> None:
        for cpu in self.sorted_cpus():
            self.take(frozenset((cpu,)))
            if self.satisfied():
                return


def take_by_topology_numa_packed(
    topo: CPUTopology,
    available: Iterable[int],
    num_cpus: int,
    sorting: str = PACKED,
    prefer_align_by_uncore_cache: bool = False,
) -> CPUs:
    """Best-fit, topology-first selection of ``num_cpus`` CPUs out of ``available`` (takeByTopologyNUMAPacked).

    Raises AllocationError with the kubelet's texts when it cannot.
    """
    available = frozenset(available)
    acc = _Accumulator(topo, available, num_cpus, sorting)
    if acc.satisfied():
        return acc.result
    if acc.failed():
        raise not_enough_cpus(num_cpus, len(available))
    acc.take_full_first_level()
    if acc.satisfied():
        return acc.result
    acc.take_full_second_level()
    if acc.satisfied():
        return acc.result
    if prefer_align_by_uncore_cache:
        acc.take_uncore_caches()
        if acc.satisfied():
            return acc.result
    if sorting != SPREAD:
        acc.take_full_cores()
        if acc.satisfied():
            return acc.result
    acc.take_remaining_cpus()
    if acc.satisfied():
        return acc.result
    raise AllocationError("failed to allocate cpus")
