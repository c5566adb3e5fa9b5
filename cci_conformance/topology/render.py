"""Render a Topology into a filesystem root (DIR/sys/..., DIR/proc/cpuinfo) in the kernel's exact formats."""

from __future__ import annotations

import os
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..cpuset import format_cpulist, format_cpumask
from ..errors import ConfigError
from .cpuinfo import cpuinfo_text
from .model import Cache, Topology

MARKER = ".cci-topology"  # marks a root we rendered, so re-rendering may replace it
BLOBS = ".cci-blobs"  # one file per distinct content of the read-only attributes, hard-linked into sys/
MAX_LINKS = 30000  # well below ext4's 65000 links per inode
KERNEL_MAX = 8191  # NR_CPUS - 1 of a distribution kernel
HUGEPAGE_DIRS = ("hugepages-2048kB", "hugepages-1048576kB")
RENDER_THREADS = 4
PARALLEL_FROM = 64  # CPUs; below this, threads cost more than they save
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC


def _write(path: str, data: bytes) -> None:
    fd = os.open(path, _FLAGS, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _write_many(directory: str, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        _write(f"{directory}/{name}", data)


class _Blobs:
    """Hard links to shared content files, for the per-CPU attributes that are read-only in real sysfs.

    A machine has tens of thousands of such files but only a few hundred distinct contents. Creating a
    small file costs a new inode, a data block and three syscalls; a link costs one syscall and neither,
    which measured 15-30x faster on a busy disk. Files a test might rewrite to
    simulate a change (``cpuN/online``, hugepage counts, ``smt/control``) are always written separately.
    """

    def __init__(self, directory: str):
        self.dir = directory
        self._sources: dict[bytes, list] = {}  # content -> [path, links so far]
        self._next = 0
        self._lock = threading.Lock()
        os.mkdir(directory)

    def _source(self, data: bytes) -> str:
        with self._lock:
            entry = self._sources.get(data)
            if entry is None or entry[1] >= MAX_LINKS:
                path = f"{self.dir}/{self._next}"
                self._next += 1
                _write(path, data)
                os.chmod(path, 0o444)
                entry = self._sources[data] = [path, 0]
            entry[1] += 1
            return entry[0]

    def link_many(self, directory: str, files: dict[str, bytes]) -> None:
        for name, data in files.items():
            os.link(self._source(data), f"{directory}/{name}")


class _Formats:
    """Memoised cpulist/cpumask strings: many CPUs share the same sibling sets."""

    def __init__(self, nr_cpu_ids: int):
        self.nr = nr_cpu_ids
        self._list: dict[frozenset[int], bytes] = {}
        self._mask: dict[frozenset[int], bytes] = {}

    def lst(self, cpus: frozenset[int]) -> bytes:
        out = self._list.get(cpus)
        if out is None:
            out = self._list[cpus] = (format_cpulist(cpus) + "\n").encode()
        return out

    def mask(self, cpus: frozenset[int]) -> bytes:
        out = self._mask.get(cpus)
        if out is None:
            out = self._mask[cpus] = (format_cpumask(cpus, self.nr) + "\n").encode()
        return out


def _prepare(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    marker = out_dir / MARKER
    ours = marker.exists()
    for sub in ("sys", "proc", BLOBS):
        target = out_dir / sub
        if target.exists() or target.is_symlink():
            if not ours:
                raise ConfigError(f"{target} exists and was not rendered by cci-conformance", file=str(out_dir),
                                  fix="choose an empty output directory")
            shutil.rmtree(target)


def _cache_files(cache: Cache, fmt: _Formats) -> dict[str, bytes]:
    return {
        "level": b"%d\n" % cache.level,
        "type": cache.type.encode() + b"\n",
        "size": b"%dK\n" % cache.size_kb,
        "id": b"%d\n" % cache.id,
        "shared_cpu_list": fmt.lst(cache.cpus),
        "shared_cpu_map": fmt.mask(cache.cpus),
        "coherency_line_size": b"%d\n" % cache.line_size,
    }


def _cache_index_order(cache: Cache) -> tuple[int, int]:
    # Kernel order on x86: index0 L1d, index1 L1i, index2 L2, index3 L3.
    return (cache.level, {"Data": 0, "Instruction": 1, "Unified": 2}.get(cache.type, 3))


def render(topology: Topology, out_dir: Path) -> Path:
    """Write ``out_dir/sys/...`` and ``out_dir/proc/cpuinfo`` for ``topology``; returns ``out_dir``."""
    out_dir = Path(out_dir)
    _prepare(out_dir)
    fmt = _Formats(topology.nr_cpu_ids)
    sys_dir = str(out_dir / "sys")
    cpu_dir = f"{sys_dir}/devices/system/cpu"
    node_dir = f"{sys_dir}/devices/system/node"
    os.makedirs(cpu_dir)
    os.makedirs(node_dir)
    _render_cpu_root(topology, cpu_dir, fmt)
    _render_cpus(topology, cpu_dir, fmt, _Blobs(str(out_dir / BLOBS)))
    _render_nodes(topology, node_dir, fmt)
    for core_type, dev in (("p", "cpu_core"), ("e", "cpu_atom")):
        if core_type in topology.core_types:
            os.makedirs(f"{sys_dir}/devices/{dev}")
            _write(f"{sys_dir}/devices/{dev}/cpus", fmt.lst(topology.core_types[core_type]))
    _render_pci(topology, sys_dir, fmt)
    os.makedirs(out_dir / "proc", exist_ok=True)
    _write(str(out_dir / "proc" / "cpuinfo"), cpuinfo_text(topology).encode())
    (out_dir / MARKER).write_text(topology.name + "\n")
    return out_dir


def _render_cpu_root(t: Topology, cpu_dir: str, fmt: _Formats) -> None:
    possible = t.possible_cpus or t.present_cpus
    smt_active = any(len(core) > 1 for core in t.cores)
    _write_many(cpu_dir, {
        "online": fmt.lst(t.online_cpus),
        "possible": fmt.lst(possible),
        "present": fmt.lst(t.present_cpus),
        "offline": fmt.lst(possible - t.online_cpus),  # the kernel's offline = possible minus online
        "isolated": b"\n",
        "kernel_max": b"%d\n" % KERNEL_MAX,
    })
    os.mkdir(f"{cpu_dir}/smt")
    _write_many(f"{cpu_dir}/smt",
                {"control": t.smt_control.encode() + b"\n", "active": b"1\n" if smt_active else b"0\n"})


def _render_cpus(t: Topology, cpu_dir: str, fmt: _Formats, blobs: _Blobs) -> None:
    packages = t.packages
    dies: dict[tuple[int, int], set[int]] = {}
    clusters: dict[tuple[int, int, int], set[int]] = {}
    for c in t.cpus:
        dies.setdefault((c.package, c.die), set()).add(c.id)
        if c.cluster >= 0:
            clusters.setdefault((c.package, c.die, c.cluster), set()).add(c.id)
    die_sets = {k: frozenset(v) for k, v in dies.items()}
    cluster_sets = {k: frozenset(v) for k, v in clusters.items()}
    caches_of: dict[int, list[Cache]] = {}
    for cache in sorted(t.caches, key=_cache_index_order):
        for cpu in cache.cpus:
            caches_of.setdefault(cpu, []).append(cache)
    cache_bytes = {id(cache): _cache_files(cache, fmt) for cache in t.caches}
    for cpu_id in t.offline_cpus:
        os.mkdir(f"{cpu_dir}/cpu{cpu_id}")
        _write(f"{cpu_dir}/cpu{cpu_id}/online", b"0\n")
    def one_cpu(c):
        base = f"{cpu_dir}/cpu{c.id}"
        os.mkdir(base)
        if c.id != 0:  # only hot-pluggable CPUs have cpuN/online; cpu0 (the boot CPU) does not
            _write(f"{base}/online", b"1\n")
        core = t.core_of[c.id]
        package = packages[c.package]
        die = die_sets[(c.package, c.die)]
        cluster = cluster_sets.get((c.package, c.die, c.cluster), core)
        core_list, core_mask = fmt.lst(core), fmt.mask(core)
        pkg_list, pkg_mask = fmt.lst(package), fmt.mask(package)
        os.mkdir(f"{base}/topology")
        # x86 prints an unknown cluster id as 65535 (BAD_APICID), which readers treat as "none".
        blobs.link_many(f"{base}/topology", {
            "physical_package_id": b"%d\n" % c.package,
            "die_id": b"%d\n" % c.die,
            "cluster_id": b"%d\n" % (c.cluster if c.cluster >= 0 else 65535),
            "core_id": b"%d\n" % c.core,
            "core_cpus": core_mask, "core_cpus_list": core_list,
            "thread_siblings": core_mask, "thread_siblings_list": core_list,
            "core_siblings": pkg_mask, "core_siblings_list": pkg_list,
            "package_cpus": pkg_mask, "package_cpus_list": pkg_list,
            "die_cpus": fmt.mask(die), "die_cpus_list": fmt.lst(die),
            "cluster_cpus": fmt.mask(cluster), "cluster_cpus_list": fmt.lst(cluster),
        })
        os.mkdir(f"{base}/cache")
        for index, cache in enumerate(caches_of.get(c.id, ())):
            idx_dir = f"{base}/cache/index{index}"
            os.mkdir(idx_dir)
            blobs.link_many(idx_dir, cache_bytes[id(cache)])
        os.symlink(f"../../node/node{c.node}", f"{base}/node{c.node}")

    # The work is ~45 small-file syscalls per CPU; they release the GIL, so a few threads overlap them.
    if len(t.cpus) < PARALLEL_FROM:
        for c in t.cpus:
            one_cpu(c)
        return
    chunks = [t.cpus[i::RENDER_THREADS] for i in range(RENDER_THREADS)]
    with ThreadPoolExecutor(RENDER_THREADS) as pool:
        for future in [pool.submit(lambda chunk: [one_cpu(c) for c in chunk], ch) for ch in chunks]:
            future.result()


def _meminfo(node_id: int, memory_kb: int, huge_total: int) -> bytes:
    used = memory_kb // 20 if memory_kb else 0  # a plausible, constant 5% in use
    rows = [("MemTotal", memory_kb), ("MemFree", memory_kb - used), ("MemUsed", used), ("Active", used // 2),
            ("Inactive", used // 4), ("Dirty", 0), ("FilePages", used // 4), ("AnonPages", used // 2),
            ("Shmem", 0), ("Slab", used // 8)]
    text = "".join(f"Node {node_id} {key + ':':<16}{value:>8} kB\n" for key, value in rows)
    for key, value in (("HugePages_Total", huge_total), ("HugePages_Free", huge_total), ("HugePages_Surp", 0)):
        text += f"Node {node_id} {key + ':':<17}{value:>5}\n"
    return text.encode()


def _render_nodes(t: Topology, node_dir: str, fmt: _Formats) -> None:
    online = frozenset(n.id for n in t.nodes)
    with_memory = frozenset(n.id for n in t.nodes if n.memory_kb)
    _write_many(node_dir, {
        "online": fmt.lst(online),
        "possible": fmt.lst(t.possible_nodes or online),
        "has_cpu": fmt.lst(frozenset(t.node_cpus)),
        "has_memory": fmt.lst(with_memory),
        "has_normal_memory": fmt.lst(with_memory),
    })
    for n in t.nodes:
        base = f"{node_dir}/node{n.id}"
        os.mkdir(base)
        _write_many(base, {
            "cpulist": fmt.lst(n.cpus),
            "cpumap": fmt.mask(n.cpus),
            "distance": (" ".join(map(str, n.distances)) + "\n").encode(),
            "meminfo": _meminfo(n.id, n.memory_kb, n.hugepages_2m),
        })
        os.mkdir(f"{base}/hugepages")
        for sub, count in zip(HUGEPAGE_DIRS, (n.hugepages_2m, n.hugepages_1g), strict=True):
            os.mkdir(f"{base}/hugepages/{sub}")
            value = b"%d\n" % count
            _write_many(f"{base}/hugepages/{sub}",
                        {"nr_hugepages": value, "free_hugepages": value, "surplus_hugepages": b"0\n"})
        for cpu in n.cpus:
            os.symlink(f"../../cpu/cpu{cpu}", f"{base}/cpu{cpu}")


def _render_pci(t: Topology, sys_dir: str, fmt: _Formats) -> None:
    os.makedirs(f"{sys_dir}/bus/pci/devices")
    for dev in t.pci_devices:
        domain, bus = dev.bdf.split(":")[:2]
        host = f"pci{domain}:{bus}"
        real = f"{sys_dir}/devices/{host}/{dev.bdf}"
        os.makedirs(real)
        local = t.device_local_cpus(dev)
        _write_many(real, {
            "numa_node": b"%d\n" % dev.numa_node,
            "local_cpulist": fmt.lst(local),
            "local_cpus": fmt.mask(local),
            "class": dev.pci_class.encode() + b"\n",
        })
        # The root bus carries the same affinity (read by dra-driver-cpu's opt-in PCIe locality).
        bus_dir = f"{sys_dir}/devices/{host}/pci_bus/{domain}:{bus}"
        if not os.path.isdir(bus_dir):
            os.makedirs(bus_dir)
            _write_many(bus_dir, {"cpulistaffinity": fmt.lst(local), "cpuaffinity": fmt.mask(local)})
        os.symlink(f"../../../devices/{host}/{dev.bdf}", f"{sys_dir}/bus/pci/devices/{dev.bdf}")
