"""Read a sysfs root (rendered by us, or a real /sys) back into a Topology."""

from __future__ import annotations

import os
from pathlib import Path

from ..cpuset import CPUListError, parse_cpulist
from ..errors import ConfigError
from .canonical import canonical
from .cpuinfo import read_vendor
from .model import CPU, Cache, NumaNode, PciDevice, Topology

# x86 prints BAD_APICID (65535) for an unknown cluster; dra-driver-cpu and we read that as "none" (-1).
NO_CLUSTER = {65535, 4294967295, -1}


def _read(path: str) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, 1 << 16).decode().strip()
    except OSError:
        return None
    finally:
        os.close(fd)


def _int(path: str, default: int) -> int:
    text = _read(path)
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


def _cpulist(path: str) -> frozenset[int] | None:
    text = _read(path)
    if text is None:
        return None
    try:
        return parse_cpulist(text)
    except CPUListError as exc:
        raise ConfigError(str(exc), file=path, fix="the sysfs root is corrupt; re-render it") from None


def _size_kb(text: str | None) -> int:
    if not text:
        return 0
    unit = text[-1].upper()
    scale = {"K": 1, "M": 1024, "G": 1024 * 1024}.get(unit)
    return int(text[:-1]) * scale if scale else int(text) // 1024


def read_sysfs(sys_root: Path, name: str = "") -> Topology:
    """Read ``sys_root`` (the directory standing for /sys) into a Topology."""
    root = str(sys_root)
    cpu_dir = f"{root}/devices/system/cpu"
    node_dir = f"{root}/devices/system/node"
    online = _cpulist(f"{cpu_dir}/online")
    if online is None:
        raise ConfigError("no devices/system/cpu/online", file=root, fix="give the directory that stands for /sys")
    present = _cpulist(f"{cpu_dir}/present") or online
    possible = _cpulist(f"{cpu_dir}/possible") or present
    core_type: dict[int, str] = {}
    for kind, dev in (("p", "cpu_core"), ("e", "cpu_atom")):
        for cpu in _cpulist(f"{root}/devices/{dev}/cpus") or ():
            core_type[cpu] = kind
    cpus: list[CPU] = []
    caches: dict[tuple, Cache] = {}
    for cpu_id in sorted(online):
        base = f"{cpu_dir}/cpu{cpu_id}"
        topo = f"{base}/topology"
        cluster = _int(f"{topo}/cluster_id", -1)
        node = 0  # no node link: a machine without NUMA (nri-plugins makes the same choice)
        try:
            entries = os.listdir(base)
        except FileNotFoundError:
            raise ConfigError(f"cpu{cpu_id} is online but has no directory", file=cpu_dir,
                              fix="the sysfs root is corrupt; re-render it") from None
        for entry in entries:
            if entry.startswith("node") and entry[4:].isdigit():
                node = int(entry[4:])
                break
        cpus.append(CPU(cpu_id, _int(f"{topo}/physical_package_id", 0), _int(f"{topo}/die_id", 0),
                        _int(f"{topo}/core_id", 0), node, -1 if cluster in NO_CLUSTER else cluster,
                        core_type.get(cpu_id, "")))
        if "cache" in entries:
            _read_caches(f"{base}/cache", caches)
    node_online = _cpulist(f"{node_dir}/online")
    if node_online is None:  # no NUMA in this kernel: one node holding everything
        node_online = frozenset({0})
        nodes = [NumaNode(0, frozenset(c.id for c in cpus), 0, (10,))]
        node_possible = frozenset()
    else:
        nodes = [_read_node(f"{node_dir}/node{n}", n, online) for n in sorted(node_online)]
        node_possible = _cpulist(f"{node_dir}/possible") or node_online
    vendor, model_name = read_vendor(Path(root).parent / "proc" / "cpuinfo")
    return canonical(Topology(
        name=name,
        cpus=tuple(cpus),
        nodes=tuple(nodes),
        caches=tuple(caches.values()),
        pci_devices=_read_pci(f"{root}/bus/pci/devices"),
        offline_cpus=present - online,
        possible_cpus=possible,
        possible_nodes=node_possible,
        smt_control=_read(f"{cpu_dir}/smt/control") or "notimplemented",
        vendor=vendor,
        model_name=model_name,
    ))


def _read_caches(cache_dir: str, caches: dict[tuple, Cache]) -> None:
    for index in os.listdir(cache_dir):
        if not index.startswith("index"):
            continue
        d = f"{cache_dir}/{index}"
        level, kind, cache_id = _int(f"{d}/level", 0), _read(f"{d}/type") or "Unified", _int(f"{d}/id", -1)
        key = (level, kind, cache_id)
        if cache_id >= 0 and key in caches:  # already read through another CPU sharing it
            continue
        shared = _cpulist(f"{d}/shared_cpu_list") or frozenset()
        key = (level, kind, cache_id, shared) if cache_id < 0 else key
        if key not in caches:
            caches[key] = Cache(level, kind, cache_id, _size_kb(_read(f"{d}/size")), shared,
                                _int(f"{d}/coherency_line_size", 64))


def _read_node(d: str, node_id: int, online: frozenset[int]) -> NumaNode:
    cpus = _cpulist(f"{d}/cpulist")
    if cpus is None:  # fall back to the cpuN links, as cAdvisor does
        cpus = frozenset(int(e[3:]) for e in os.listdir(d) if e.startswith("cpu") and e[3:].isdigit())
    memory_kb = 0
    for line in (_read(f"{d}/meminfo") or "").splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] == "MemTotal:":
            memory_kb = int(parts[3])
            break
    distances = tuple(int(x) for x in (_read(f"{d}/distance") or "10").split())
    huge = f"{d}/hugepages"
    return NumaNode(node_id, cpus & online, memory_kb, distances, _int(f"{huge}/hugepages-2048kB/nr_hugepages", 0),
                    _int(f"{huge}/hugepages-1048576kB/nr_hugepages", 0))


def _read_pci(devices_dir: str) -> tuple[PciDevice, ...]:
    try:
        bdfs = sorted(os.listdir(devices_dir))
    except FileNotFoundError:
        return ()
    return tuple(PciDevice(bdf, _read(f"{devices_dir}/{bdf}/class") or "", _int(f"{devices_dir}/{bdf}/numa_node", -1))
                 for bdf in bdfs)
