"""Topology-aware best-fit CPU placement for the reference driver (whole NUMA nodes, then whole cores, then threads)."""

from __future__ import annotations

from functools import cached_property

from cci_conformance.topology.model import Topology

CPUs = frozenset[int]


class NoFit(Exception):
    """The request cannot be placed in the given domain."""


class Placer:
    """Precomputed topology views plus the take-by-topology steps, in the spirit of the kubelet's
    static policy (takeByTopology: whole sockets/NUMA nodes, then whole cores, then single threads)."""

    def __init__(self, topology: Topology):
        self.topology = topology

    @cached_property
    def node_cores(self) -> dict[int, tuple[tuple[int, ...], ...]]:
        """NUMA node -> its cores (sorted thread ids), ordered by lowest thread id."""
        out: dict[int, list[tuple[int, ...]]] = {n: [] for n in self.topology.node_cpus}
        for core in self.topology.cores:
            out[self.topology.node_of[min(core)]].append(tuple(sorted(core)))
        return {n: tuple(cores) for n, cores in out.items()}

    @cached_property
    def node_core_sets(self) -> dict[int, tuple[CPUs, ...]]:
        return {n: tuple(frozenset(c) for c in cores) for n, cores in self.node_cores.items()}

    @property
    def cpu_nodes(self) -> tuple[int, ...]:
        return tuple(sorted(self.node_cores))

    # ---- per-node building blocks ----
    def free_cores(self, node: int, free: CPUs) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
        """(whole free cores, the free threads of partly used cores) on ``node``."""
        whole, partial = [], []
        for core in self.node_cores[node]:
            ts = tuple(t for t in core if t in free)
            if len(ts) == len(core):
                whole.append(core)
            elif ts:
                partial.append(ts)
        return whole, partial

    def capacity(self, node: int, free: CPUs, siblings: str) -> int:
        """How many CPUs ``node`` can give in this sibling mode (set operations only: this runs per node
        on every admission, so it must stay cheap on 1024-CPU machines)."""
        if siblings == "required":
            return sum(len(c) for c in self.node_core_sets[node] if c <= free)
        if siblings == "denied":
            return sum(1 for c in self.node_core_sets[node] if c <= free)
        return len(free & self.topology.node_cpus[node])

    def take_on_node(self, node: int, free: CPUs, n: int, siblings: str) -> CPUs:
        """``n`` CPUs from one node: whole cores first, then (preferred) the fewest split cores."""
        whole, partial = self.free_cores(node, free)
        if siblings == "denied":  # one thread per whole free core; the siblings are withheld by the caller
            if len(whole) < n:
                raise NoFit
            return frozenset(core[0] for core in whole[:n])
        return self.pack(whole, partial, n, siblings)

    def pack(self, whole: list[tuple[int, ...]], partial: list[tuple[int, ...]], n: int, siblings: str) -> CPUs:
        """``n`` CPUs from these whole free cores and free threads of partly used cores: whole cores first,
        then (preferred) the fewest split cores, at most one whenever the cores allow it (spec S2.4)."""
        taken: list[int] = []
        rem = n
        for core in sorted(whole, key=len, reverse=True):  # hybrid parts: big cores first
            if rem >= len(core):
                taken.extend(core)
                rem -= len(core)
            if rem == 0:
                break
        if rem == 0:
            return frozenset(taken)
        if siblings == "required":
            raise NoFit
        used = set(taken)
        leftover = [c for c in whole if c[0] not in used]
        # Remainder: the smallest partly used core that holds it (no new split), else split the smallest
        # whole core that holds it (one split), else gather fragments.
        fit = next((p for p in sorted(partial, key=len) if len(p) >= rem), None)
        if fit is None:
            fit = next((c for c in sorted(leftover, key=len) if len(c) >= rem), None)
        if fit is not None:
            return frozenset(taken) | frozenset(fit[:rem])
        pool = [t for p in partial for t in p] + [t for c in leftover for t in c]
        if len(pool) < rem:
            raise NoFit
        return frozenset(taken) | frozenset(pool[:rem])

    # ---- domains ----
    def take_single(self, nodes: list[int], free: CPUs, n: int, siblings: str) -> CPUs:
        """Best fit on one node: the node whose capacity exceeds ``n`` by the least, passing over nodes where
        the group would split more than one core while another node keeps it packed (spec S2.4)."""
        fits = [(self.capacity(node, free, siblings), node) for node in nodes]
        fits = sorted((cap, node) for cap, node in fits if cap >= n)
        fallback = None
        for _, node in fits:
            try:
                taken = self.take_on_node(node, free, n, siblings)
            except NoFit:
                continue
            if siblings != "preferred" or self.split_cores(taken) <= 1:
                return taken
            fallback = fallback or taken
        if fallback is None:
            raise NoFit
        return fallback

    def split_cores(self, cpus: CPUs) -> int:
        """How many cores ``cpus`` touches without holding all their threads."""
        core_of = self.topology.core_of
        return len({core_of[c] for c in cpus if not core_of[c] <= cpus})

    def take_any(self, nodes: list[int], free: CPUs, n: int, siblings: str, unit: int) -> CPUs:
        """One node if it fits; else whole free nodes first, then the emptiest nodes, ``unit`` CPUs at a time."""
        try:
            return self.take_single(nodes, free, n, siblings)
        except NoFit:
            pass
        caps = {node: self.capacity(node, free, siblings) for node in nodes}
        sizes = {node: len(self.topology.node_cpus[node]) for node in nodes}
        order = sorted(nodes, key=lambda nd: (caps[nd] != sizes[nd], -caps[nd], nd))
        if siblings == "required":
            return self.take_whole_cores(order, free, n)
        if siblings == "preferred":  # packed across the nodes as a whole: node by node would split one per node
            whole, partial = [], []
            for node in order:
                w, p = self.free_cores(node, free)
                whole += w
                partial += p
            return self.pack(whole, partial, n, siblings)
        taken: CPUs = frozenset()
        rem = n
        for node in order:
            if rem == 0:
                break
            k = min(rem, caps[node] - caps[node] % unit)
            if k <= 0:
                continue
            taken |= self.take_on_node(node, free, k, siblings)
            rem -= k
        if rem:
            raise NoFit
        return taken

    def take_whole_cores(self, order: list[int], free: CPUs, n: int) -> CPUs:
        """Exactly ``n`` CPUs as whole free cores over several nodes, filling nodes in ``order``. Where cores
        differ in size (hybrid parts, offline siblings) a node-by-node fill can strand a remainder, so the
        fallback takes the biggest cores first, which always fits when sizes are 1 and t and n is a multiple of t."""
        cores = [c for node in order for c in sorted(self.free_cores(node, free)[0], key=len, reverse=True)]
        for candidates in (cores, sorted(cores, key=len, reverse=True)):
            taken: list[int] = []
            rem = n
            for core in candidates:
                if len(core) <= rem:
                    taken.extend(core)
                    rem -= len(core)
                if rem == 0:
                    return frozenset(taken)
        raise NoFit

    @cached_property
    def mixed_cores(self) -> bool:
        """Cores of several sizes (hybrid parts, offline siblings): whole-core counts are not multiples of t."""
        return len({len(c) for c in self.topology.cores}) > 1

    def take_spread(self, nodes: list[int], free: CPUs, n: int, siblings: str, unit: int) -> CPUs:
        """Interleave: at least ``unit`` CPUs on every node of ``nodes``, the rest spread evenly."""
        if siblings == "required" and self.mixed_cores:
            return self.take_spread_whole(nodes, free, n)
        caps = {node: self.capacity(node, free, siblings) // unit for node in nodes}
        units = n // unit
        if n % unit or units < len(nodes) or any(c < 1 for c in caps.values()) or sum(caps.values()) < units:
            raise NoFit
        share = dict.fromkeys(nodes, 0)
        left = units
        while left:
            progressed = False
            for node in nodes:
                if left and share[node] < caps[node]:
                    share[node] += 1
                    left -= 1
                    progressed = True
            if not progressed:
                raise NoFit
        taken: CPUs = frozenset()
        for node in nodes:
            taken |= self.take_on_node(node, free, share[node] * unit, siblings)
        return taken

    def take_spread_whole(self, nodes: list[int], free: CPUs, n: int) -> CPUs:
        """Interleave with whole cores of several sizes: exactly ``n`` CPUs, at least one whole core per node
        (a subset sum per node, then one over the nodes; the sums stay below ``n``)."""
        sums: dict[int, dict[int, tuple]] = {}
        for node in nodes:
            reach: dict[int, tuple] = {0: ()}
            for core in self.free_cores(node, free)[0]:
                for total, cores in list(reach.items()):
                    if total + len(core) <= n and total + len(core) not in reach:
                        reach[total + len(core)] = cores + (core,)
            reach.pop(0)
            if not reach:
                raise NoFit
            sums[node] = reach
        totals: dict[int, tuple[int, ...]] = {0: ()}
        for node in nodes:
            totals = {t + k: parts + (k,) for t, parts in totals.items() for k in sums[node] if t + k <= n}
        if n not in totals:
            raise NoFit
        return frozenset(c for node, k in zip(nodes, totals[n], strict=True) for core in sums[node][k] for c in core)
