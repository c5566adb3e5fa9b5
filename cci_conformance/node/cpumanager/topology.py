"""The kubelet's CPUTopology and CPUDetails, derived from our Topology model as cAdvisor and the kubelet would."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from ...cpuset import CPUs
from ...topology.model import Topology


@dataclass(frozen=True, order=True)
class CPUInfo:
    """Where one logical CPU sits (pkg/kubelet/cm/cpumanager/topology CPUInfo)."""

    numa_node: int
    socket: int
    core: int  # the lowest thread id of the physical core, unique machine-wide (getUniqueCoreID)
    uncore_cache: int = 0


class CPUDetails:
    """CPU id -> CPUInfo, with the set queries of the kubelet's CPUDetails (indexes built once)."""

    __slots__ = ("_info", "_index")

    def __init__(self, info: Mapping[int, CPUInfo]):
        self._info = dict(info)
        self._index: dict[str, dict[int, set[int]]] | None = None

    def __getitem__(self, cpu: int) -> CPUInfo:
        return self._info[cpu]

    def __contains__(self, cpu: object) -> bool:
        return cpu in self._info

    def __len__(self) -> int:
        return len(self._info)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CPUDetails) and self._info == other._info

    def __repr__(self) -> str:
        return f"CPUDetails({self._info!r})"

    def items(self):
        return self._info.items()

    def _by(self, attr: str) -> dict[int, set[int]]:
        if self._index is None:
            self._index = {}
        table = self._index.get(attr)
        if table is None:
            table = {}
            for cpu, info in self._info.items():
                table.setdefault(getattr(info, attr), set()).add(cpu)
            self._index[attr] = table
        return table

    def _cpus_in(self, attr: str, ids: Iterable[int]) -> CPUs:
        table = self._by(attr)
        out: set[int] = set()
        for i in ids:
            out |= table.get(i, set())
        return frozenset(out)

    def _ids_of(self, attr: str, cpus: Iterable[int]) -> frozenset[int]:
        return frozenset(getattr(self._info[c], attr) for c in cpus)

    # ---- the queries cpu_assignment.go uses ----
    def keep_only(self, cpus: Iterable[int]) -> CPUDetails:
        keep = set(cpus)
        return CPUDetails({c: i for c, i in self._info.items() if c in keep})

    def cpus(self) -> CPUs:
        return frozenset(self._info)

    def numa_nodes(self) -> frozenset[int]:
        return frozenset(self._by("numa_node"))

    def sockets(self) -> frozenset[int]:
        return frozenset(self._by("socket"))

    def cores(self) -> frozenset[int]:
        return frozenset(self._by("core"))

    def uncore_caches(self) -> frozenset[int]:
        return frozenset(self._by("uncore_cache"))

    def cpus_in_numa_nodes(self, *ids: int) -> CPUs:
        return self._cpus_in("numa_node", ids)

    def cpus_in_sockets(self, *ids: int) -> CPUs:
        return self._cpus_in("socket", ids)

    def cpus_in_cores(self, *ids: int) -> CPUs:
        return self._cpus_in("core", ids)

    def cpus_in_uncore_caches(self, *ids: int) -> CPUs:
        return self._cpus_in("uncore_cache", ids)

    def sockets_in_numa_nodes(self, *ids: int) -> frozenset[int]:
        return self._ids_of("socket", self.cpus_in_numa_nodes(*ids))

    def numa_nodes_in_sockets(self, *ids: int) -> frozenset[int]:
        return self._ids_of("numa_node", self.cpus_in_sockets(*ids))

    def cores_in_sockets(self, *ids: int) -> frozenset[int]:
        return self._ids_of("core", self.cpus_in_sockets(*ids))

    def cores_in_numa_nodes(self, *ids: int) -> frozenset[int]:
        return self._ids_of("core", self.cpus_in_numa_nodes(*ids))

    def uncore_in_numa_nodes(self, *ids: int) -> frozenset[int]:
        return self._ids_of("uncore_cache", self.cpus_in_numa_nodes(*ids))

    def cores_needed_in_uncore_cache(self, num_cores_needed: int, *ids: int) -> frozenset[int]:
        """The lowest ``num_cores_needed`` core ids in the given uncore caches (all of them if fewer)."""
        core_ids = sorted(self._ids_of("core", self.cpus_in_uncore_caches(*ids)))
        return frozenset(core_ids[: max(num_cores_needed, 0)])


@dataclass(frozen=True)
class CPUTopology:
    """The kubelet's CPUTopology: counts as the kubelet computes them, plus per-CPU details."""

    num_cpus: int
    num_cores: int
    num_sockets: int
    num_numa_nodes: int
    details: CPUDetails
    num_uncore_caches: int = 0
    name: str = field(default="", compare=False)

    @property
    def cpus_per_core(self) -> int:
        return self.num_cpus // self.num_cores if self.num_cores else 0

    @property
    def cpus_per_socket(self) -> int:
        return self.num_cpus // self.num_sockets if self.num_sockets else 0

    @property
    def cpus_per_uncore(self) -> int:
        return self.num_cpus // self.num_uncore_caches if self.num_uncore_caches else 0

    @cached_property
    def all_cpus(self) -> CPUs:
        return self.details.cpus()

    def core_of(self, cpu: int) -> int:
        """``CPUCoreID``; raises KeyError with the kubelet's text for an unknown CPU."""
        if cpu not in self.details:
            raise KeyError(f"unknown CPU ID: {cpu}")
        return self.details[cpu].core


def build_cpu_topology(
    info: Mapping[int, CPUInfo],
    *,
    num_cpus: int | None = None,
    num_cores: int | None = None,
    num_sockets: int | None = None,
    num_numa_nodes: int | None = None,
    num_uncore_caches: int | None = None,
    name: str = "",
) -> CPUTopology:
    """A CPUTopology from per-CPU info; counts not given are derived the way ``Discover`` derives them."""
    details = CPUDetails(info)
    return CPUTopology(
        num_cpus=len(details) if num_cpus is None else num_cpus,
        num_cores=len(details.cores()) if num_cores is None else num_cores,
        num_sockets=len(details.sockets()) if num_sockets is None else num_sockets,
        num_numa_nodes=len(details.numa_nodes()) if num_numa_nodes is None else num_numa_nodes,
        num_uncore_caches=len(details.uncore_caches()) if num_uncore_caches is None else num_uncore_caches,
        details=details,
        name=name,
    )


def from_model(topology: Topology) -> CPUTopology:
    """Derive the CPUTopology the kubelet would build on this machine (topology.Discover over cAdvisor).

    - CoreID is the lowest thread id of each physical core (``getUniqueCoreID``).
    - cAdvisor's ``addCacheInfo`` lists a cache of level > 2 under a core's ``UncoreCaches`` unless it
      spans ``cores in the node x threads of this core`` CPUs (then it is a node cache). UncoreCacheID is
      the first such cache's id, else the socket id (``getUncoreCacheID``).
    - NumCPUs counts online CPUs, NumSockets the packages, NumCores the physical cores,
      NumNUMANodes the nodes that have CPUs.
    """
    cores_in_node: dict[int, int] = {}
    for core in topology.cores:
        node = topology.by_id[min(core)].node
        cores_in_node[node] = cores_in_node.get(node, 0) + 1
    upper_caches: dict[int, list[tuple[int, int, int]]] = {}  # cpu -> [(level, id, CPUs sharing)]
    for cache in topology.caches:
        if cache.level > 2:
            for cpu in cache.cpus:
                upper_caches.setdefault(cpu, []).append((cache.level, cache.id, len(cache.cpus)))
    info: dict[int, CPUInfo] = {}
    for core in topology.cores:
        core_id = min(core)
        first = topology.by_id[core_id]
        per_node = cores_in_node[first.node] * len(core)
        uncore = next(
            (cid for _, cid, size in sorted(upper_caches.get(core_id, ())) if size != per_node), first.package
        )
        for cpu in core:
            c = topology.by_id[cpu]
            info[cpu] = CPUInfo(numa_node=c.node, socket=c.package, core=core_id, uncore_cache=uncore)
    return build_cpu_topology(info, num_cores=len(topology.cores), name=topology.name)
