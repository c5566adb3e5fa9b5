"""Expand a schema-valid topology spec (a dict) into a Topology, checking what a schema cannot."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..cpuset import CPUListError, format_cpulist, parse_cpulist
from ..errors import ConfigError
from .caches import build_caches
from .canonical import canonical
from .model import CPU, NumaNode, PciDevice, Topology

DEVICE_CLASSES = {"nic": "0x020000", "nvme": "0x010802", "gpu": "0x030200", "accelerator": "0x120000"}
DEFAULT_MEMORY_KB = 16 * 1024 * 1024
# Default NUMA distances (ACPI SLIT style): local 10, same package (sub-NUMA) 11, other package 21,
# CPU-less memory (CXL/HBM-like) 20 from everything else.
SAME_PACKAGE, OTHER_PACKAGE, MEMORY_ONLY = 11, 21, 20
_UNITS = {"": 1, "K": 1, "M": 1024, "G": 1024**2, "T": 1024**3}


@dataclass
class CoreSlot:
    """One physical core before CPU ids are assigned."""

    package: int
    die: int
    node: int
    core: int
    cluster: int
    core_type: str
    threads: int
    node_path: str  # spec path of the node entry it came from, for errors
    group: int  # index of its core group within the node entry
    group_spec: dict
    index_in_node: int
    index_in_group: int
    cpus: list[int] = field(default_factory=list)  # thread ids in thread order


@dataclass
class NodeSlot:
    id: int
    package: int  # -1 for CPU-less memory nodes
    path: str
    spec: dict
    cores: list[CoreSlot] = field(default_factory=list)


class Builder:
    def __init__(self, data: dict, file: str):
        self.data = data
        self.file = file
        self.threads_default = data.get("threads_per_core", 1)
        self.numbering = data.get("numbering", "intel")

    def error(self, field_path: str, problem: str, fix: str) -> ConfigError:
        return ConfigError(problem, file=self.file, field=field_path, fix=fix)

    def cpulist(self, key: str) -> frozenset[int]:
        try:
            return parse_cpulist(str(self.data.get(key, "")))
        except CPUListError as exc:
            raise self.error(key, str(exc), "write a cpulist such as '0-3,8'") from None

    # ---- shape ----
    def expand(self) -> tuple[list[NodeSlot], list[CoreSlot]]:
        nodes: list[NodeSlot] = []
        cores: list[CoreSlot] = []
        package = 0
        for i, pkg in enumerate(self.data["packages"]):
            for _ in range(pkg.get("count", 1)):
                self._expand_package(f"packages[{i}]", pkg, package, nodes, cores)
                package += 1
        for i, mem in enumerate(self.data.get("memory_nodes", [])):
            for _ in range(mem.get("count", 1)):
                nodes.append(NodeSlot(len(nodes), -1, f"memory_nodes[{i}]", mem))
        return nodes, cores

    def _expand_package(self, path: str, pkg: dict, package: int, nodes: list, cores: list) -> None:
        entries = [(f"{path}.nodes[{j}]", n) for j, n in enumerate(pkg["nodes"]) for _ in range(n.get("count", 1))]
        dies = pkg.get("dies", 1)
        n_nodes = len(entries)
        if dies <= n_nodes and n_nodes % dies:
            raise self.error(f"{path}.dies", f"{dies} dies do not divide the package's {n_nodes} NUMA nodes",
                             "use a die count that divides the node count, or a multiple of it")
        if dies > n_nodes and dies % n_nodes:
            raise self.error(f"{path}.dies", f"{n_nodes} NUMA nodes do not divide the package's {dies} dies",
                             "use a die count that divides the node count, or a multiple of it")
        core_id = cluster_id = 0
        for k, (npath, nspec) in enumerate(entries):
            node = NodeSlot(len(nodes), package, npath, nspec)
            nodes.append(node)
            groups = nspec["cores"]
            if isinstance(groups, int):
                groups = [{"count": groups}]
            slots: list[CoreSlot] = []
            for g, grp in enumerate(groups):
                gpath = f"{npath}.cores[{g}]" if isinstance(nspec["cores"], list) else f"{npath}.cores"
                per_cluster = grp.get("cores_per_cluster", 0)
                if per_cluster and grp["count"] % per_cluster:
                    raise self.error(f"{gpath}.cores_per_cluster",
                                     f"{per_cluster} cores per cluster do not divide the group's {grp['count']} cores",
                                     "use a cluster size that divides the core count")
                for c in range(grp["count"]):
                    cluster = -1
                    if per_cluster:
                        cluster = cluster_id + c // per_cluster
                    slots.append(CoreSlot(package, 0, node.id, core_id, cluster, grp.get("type", ""),
                                          grp.get("threads", self.threads_default), npath, g, grp, len(slots), c))
                    core_id += 1
                if per_cluster:
                    cluster_id += grp["count"] // per_cluster
            if dies <= n_nodes:
                die = k // (n_nodes // dies)
                for s in slots:
                    s.die = die
            else:
                per_node = dies // n_nodes
                if len(slots) % per_node:
                    raise self.error(f"{npath}.cores", f"{len(slots)} cores do not split over {per_node} dies",
                                     f"use a core count divisible by {per_node}")
                chunk = len(slots) // per_node
                for s in slots:
                    s.die = k * per_node + s.index_in_node // chunk
            node.cores = slots
            cores.extend(slots)
        if not any(node.cores for node in nodes if node.package == package):
            raise self.error(path, "package has no cores", "give its nodes at least one core")

    # ---- CPU ids ----
    def number(self, nodes: list[NodeSlot], cores: list[CoreSlot]) -> None:
        if self.numbering == "explicit":
            self._number_explicit(nodes)
            return
        for node in nodes:
            if node.package >= 0 and "cpus" in node.spec:
                raise self.error(f"{node.path}.cpus", "cpus is only used with numbering: explicit",
                                 "remove it, or set numbering: explicit at the top")
        next_id = 0
        if self.numbering == "amd":  # siblings adjacent: core k has threads kT .. kT+T-1
            for core in cores:
                core.cpus = list(range(next_id, next_id + core.threads))
                next_id += core.threads
        else:  # intel: every core's first thread, then every core's second thread, ...
            for t in range(max(c.threads for c in cores)):
                for core in cores:
                    if core.threads > t:
                        core.cpus.append(next_id)
                        next_id += 1

    def _number_explicit(self, nodes: list[NodeSlot]) -> None:
        owner: dict[int, str] = {}
        for node in nodes:
            if node.package < 0:
                continue
            if "cpus" not in node.spec:
                raise self.error(node.path, "numbering: explicit needs the node's CPU ids",
                                 "add cpus: '<cpulist>' to every node (or use numbering: intel/amd)")
            if node.spec.get("count", 1) != 1:
                raise self.error(f"{node.path}.count", "a node with explicit cpus cannot be repeated",
                                 "write one node entry per NUMA node")
            try:
                ids = sorted(parse_cpulist(node.spec["cpus"]))
            except CPUListError as exc:
                raise self.error(f"{node.path}.cpus", str(exc), "write a cpulist such as '0-3,8'") from None
            need = sum(c.threads for c in node.cores)
            if len(ids) != need:
                raise self.error(f"{node.path}.cpus", f"lists {len(ids)} CPU ids but the node has {need} threads",
                                 f"list exactly {need} CPU ids")
            clash = [i for i in ids if i in owner]
            if clash:
                raise self.error(f"{node.path}.cpus",
                                 f"CPU ids {format_cpulist(clash)} overlap those of {owner[clash[0]]}",
                                 "give each CPU id to exactly one node")
            owner.update(dict.fromkeys(ids, f"{node.path}.cpus"))
            # Within a node, ascending ids go to first threads of all cores, then second threads (kernel-like).
            it = iter(ids)
            for t in range(max(c.threads for c in node.cores)):
                for core in node.cores:
                    if core.threads > t:
                        core.cpus.append(next(it))

    # ---- the whole machine ----
    def build(self) -> Topology:
        nodes, cores = self.expand()
        self.number(nodes, cores)
        numbered = frozenset(i for c in cores for i in c.cpus)
        offline, absent, extra = self.cpulist("offline"), self.cpulist("not_present"), self.cpulist("possible")
        for key, ids in (("offline", offline), ("not_present", absent)):
            if ids - numbered:
                raise self.error(key, f"CPU ids {format_cpulist(ids - numbered)} are not CPUs of this machine",
                                 f"use ids from {format_cpulist(numbered)}")
            if 0 in ids:
                raise self.error(key, "cpu 0 is the boot CPU and must stay online", "remove 0 from the list")
        if offline & absent:
            raise self.error("not_present", f"CPU ids {format_cpulist(offline & absent)} are also offline",
                             "a CPU is either offline (present) or not present, not both")
        cpus = []
        for core in cores:
            for cpu_id in core.cpus:
                if cpu_id not in offline and cpu_id not in absent:
                    cpus.append(CPU(cpu_id, core.package, core.die, core.core, core.node, core.cluster,
                                    core.core_type))
        present = (numbered - absent) | offline
        possible = numbered | extra
        by_node: dict[int, set[int]] = {}
        for c in cpus:
            by_node.setdefault(c.node, set()).add(c.id)
        distances = self.distances(nodes)
        numa = tuple(
            NumaNode(n.id, frozenset(by_node.get(n.id, ())), self.size(n.spec.get("memory"), f"{n.path}.memory"),
                     distances[n.id], n.spec.get("hugepages", {}).get("2M", 0),
                     n.spec.get("hugepages", {}).get("1G", 0))
            for n in nodes
        )
        node_ids = frozenset(n.id for n in nodes)
        possible_nodes = self.cpulist("possible_nodes") | node_ids
        smt = self.smt_control(cores)
        online_ids = frozenset(c.id for c in cpus)
        topo = Topology(
            name=self.data.get("name", ""),
            cpus=tuple(cpus),
            nodes=numa,
            caches=build_caches(self, cores, online_ids),
            pci_devices=self.devices(node_ids),
            offline_cpus=offline,
            possible_cpus=possible if possible != present else frozenset(),
            possible_nodes=possible_nodes,
            smt_control=smt,
            description=self.data.get("description", ""),
            vendor=self.data.get("vendor", "amd" if self.numbering == "amd" else "intel"),
            model_name=self.data.get("model_name", ""),
        )
        return canonical(topo)

    def size(self, value, path: str) -> int:
        if value is None:
            return DEFAULT_MEMORY_KB
        if isinstance(value, int):
            return value
        text = value.replace(" ", "").upper().removesuffix("B").removesuffix("I")
        unit = text[-1] if text[-1] in _UNITS else ""
        number = text[: len(text) - len(unit)]
        if not number.isdigit():
            raise self.error(path, f"not a size: {value!r}", "write e.g. 48K, 2M, 64G or a number of KiB")
        return int(number) * _UNITS[unit]

    def distances(self, nodes: list[NodeSlot]) -> list[tuple[int, ...]]:
        n = len(nodes)
        given = self.data.get("distances")
        if given is None:
            def dist(a: NodeSlot, b: NodeSlot) -> int:
                if a.id == b.id:
                    return 10
                if a.package < 0 or b.package < 0:
                    return MEMORY_ONLY
                return SAME_PACKAGE if a.package == b.package else OTHER_PACKAGE
            return [tuple(dist(a, b) for b in nodes) for a in nodes]
        fix = f"write a {n}x{n} matrix (one row per NUMA node, memory nodes last), 10 on the diagonal, symmetric"
        if len(given) != n:
            raise self.error("distances", f"has {len(given)} rows but the machine has {n} NUMA nodes", fix)
        for i, row in enumerate(given):
            if len(row) != n:
                raise self.error(f"distances[{i}]", f"has {len(row)} entries, expected {n}", fix)
            for j, value in enumerate(row):
                if i == j and value != 10:
                    raise self.error(f"distances[{i}][{j}]", f"a node's distance to itself is {value}, not 10", fix)
                if i != j and value <= 10:
                    raise self.error(f"distances[{i}][{j}]", f"remote distance {value} must be above 10", fix)
                if given[j][i] != value:
                    raise self.error(f"distances[{i}][{j}]", f"is {value} but distances[{j}][{i}] is {given[j][i]}",
                                     fix)
        return [tuple(row) for row in given]

    def smt_control(self, cores: list[CoreSlot]) -> str:
        threaded = any(c.threads > 1 for c in cores)
        value = self.data.get("smt_control", "on" if threaded else "notsupported")
        if value == "notsupported" and threaded:
            raise self.error("smt_control", "notsupported, but some cores have more than one thread",
                             "use threads_per_core: 1, or smt_control: on")
        return value

    def devices(self, node_ids: frozenset[int]) -> tuple[PciDevice, ...]:
        out: dict[str, PciDevice] = {}
        for i, dev in enumerate(self.data.get("devices", [])):
            if dev["bdf"] in out:
                raise self.error(f"devices[{i}].bdf", f"{dev['bdf']} is listed twice", "give each device its own BDF")
            if dev["node"] != -1 and dev["node"] not in node_ids:
                raise self.error(f"devices[{i}].node", f"NUMA node {dev['node']} does not exist",
                                 f"use one of {format_cpulist(node_ids)} or -1 (no locality)")
            pci_class = dev.get("class", "nic")
            out[dev["bdf"]] = PciDevice(dev["bdf"], DEVICE_CLASSES.get(pci_class, pci_class), dev["node"])
        return tuple(out.values())
