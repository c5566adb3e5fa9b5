"""The in-memory machine model that renderer, reader, node and drivers all share."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ..cpuset import CPUs


@dataclass(frozen=True, order=True)
class CPU:
    """One online logical CPU, with the ids sysfs gives it."""

    id: int
    package: int  # topology/physical_package_id
    die: int  # topology/die_id
    core: int  # topology/core_id (unique only within package+die, as on real machines)
    node: int  # the NUMA node of cpuN/nodeM
    cluster: int = -1  # topology/cluster_id; -1 where the machine has none
    core_type: str = ""  # "", or "p"/"e" on hybrid parts (devices/cpu_core, devices/cpu_atom)

    @property
    def core_key(self) -> tuple[int, int, int, int]:
        """Identity of the physical core this thread belongs to."""
        return (self.package, self.die, self.cluster, self.core)


@dataclass(frozen=True, order=True)
class Cache:
    """One cache instance (cpuN/cache/indexM), shared by ``cpus``."""

    level: int
    type: str  # "Data" | "Instruction" | "Unified"
    id: int
    size_kb: int
    cpus: CPUs
    line_size: int = 64


@dataclass(frozen=True, order=True)
class NumaNode:
    """One online NUMA node; ``cpus`` may be empty (CPU-less memory node)."""

    id: int
    cpus: CPUs
    memory_kb: int
    distances: tuple[int, ...]  # row of node/nodeN/distance, one entry per online node, ascending ids
    hugepages_2m: int = 0
    hugepages_1g: int = 0


@dataclass(frozen=True, order=True)
class PciDevice:
    """A PCI function with NUMA locality (bus/pci/devices/<bdf>)."""

    bdf: str  # "0000:3b:00.0"
    pci_class: str  # "0x020000"
    numa_node: int  # -1 when the device has no locality


@dataclass(frozen=True)
class Topology:
    """A whole machine as sysfs shows it.

    ``cpus`` are the online CPUs with full topology; ``offline_cpus`` are present but offline
    (the kernel removes their topology directory, so only their ids are known); CPUs in
    ``possible_cpus`` but in neither are not present.
    """

    name: str
    cpus: tuple[CPU, ...]
    nodes: tuple[NumaNode, ...]
    caches: tuple[Cache, ...] = ()
    pci_devices: tuple[PciDevice, ...] = ()
    offline_cpus: CPUs = frozenset()
    possible_cpus: CPUs = frozenset()  # empty means "exactly the present CPUs"
    possible_nodes: frozenset[int] = frozenset()  # empty means "exactly the online nodes"
    smt_control: str = "on"  # on | off | forceoff | notsupported | notimplemented
    description: str = field(default="", compare=False)
    # Descriptive /proc/cpuinfo data; not part of the shape, so not compared.
    vendor: str = field(default="", compare=False)  # "intel" | "amd" | "" (unknown)
    model_name: str = field(default="", compare=False)

    # ---- derived views (everything below is computed from the fields above) ----
    @cached_property
    def by_id(self) -> dict[int, CPU]:
        return {c.id: c for c in self.cpus}

    @cached_property
    def online_cpus(self) -> CPUs:
        return frozenset(self.by_id)

    @cached_property
    def present_cpus(self) -> CPUs:
        return self.online_cpus | self.offline_cpus

    @cached_property
    def nr_cpu_ids(self) -> int:
        """Width the kernel uses for masks: highest possible CPU id + 1."""
        universe = self.possible_cpus or self.present_cpus
        return max(universe) + 1 if universe else 1

    @cached_property
    def cores(self) -> tuple[CPUs, ...]:
        """Physical cores as sets of sibling thread ids, ordered by their lowest thread id."""
        groups: dict[tuple[int, int, int, int], set[int]] = {}
        for c in self.cpus:
            groups.setdefault(c.core_key, set()).add(c.id)
        return tuple(sorted((frozenset(g) for g in groups.values()), key=min))

    @cached_property
    def core_of(self) -> dict[int, CPUs]:
        """CPU id -> the set of its core's sibling threads (itself included)."""
        return {cpu: core for core in self.cores for cpu in core}

    @cached_property
    def threads_per_core(self) -> int:
        """The largest number of threads any core has (hybrid parts mix 2 and 1)."""
        return max((len(c) for c in self.cores), default=1)

    @cached_property
    def packages(self) -> dict[int, CPUs]:
        out: dict[int, set[int]] = {}
        for c in self.cpus:
            out.setdefault(c.package, set()).add(c.id)
        return {k: frozenset(v) for k, v in sorted(out.items())}

    @cached_property
    def node_cpus(self) -> dict[int, CPUs]:
        """NUMA node id -> its online CPUs, for nodes that have CPUs."""
        return {n.id: n.cpus for n in self.nodes if n.cpus}

    @cached_property
    def node_of(self) -> dict[int, int]:
        return {c.id: c.node for c in self.cpus}

    def l3_groups(self) -> tuple[CPUs, ...]:
        """Sets of CPUs sharing one L3 cache instance (empty when the machine has no L3)."""
        return tuple(sorted({c.cpus for c in self.caches if c.level == 3}, key=min))

    @cached_property
    def core_types(self) -> dict[str, CPUs]:
        """Core type ("p"/"e") -> its online CPUs; empty on non-hybrid machines."""
        out: dict[str, set[int]] = {}
        for c in self.cpus:
            if c.core_type:
                out.setdefault(c.core_type, set()).add(c.id)
        return {k: frozenset(v) for k, v in sorted(out.items())}

    def device_local_cpus(self, device: PciDevice) -> CPUs:
        """CPUs local to a device: its node's CPUs, or every online CPU when it has no locality."""
        if device.numa_node < 0:
            return self.online_cpus
        return self.node_cpus.get(device.numa_node, frozenset())

    def device(self, bdf: str) -> PciDevice | None:
        return next((d for d in self.pci_devices if d.bdf == bdf), None)
