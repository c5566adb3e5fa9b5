"""A readable picture of a machine (sockets, NUMA nodes, cores, threads, caches, devices) and its JSON form."""

from __future__ import annotations

from ..cpuset import format_cpulist
from .model import Topology


def _size(kb: int) -> str:
    for unit, scale in (("TiB", 1024**3), ("GiB", 1024**2), ("MiB", 1024)):
        if kb >= scale and kb % scale == 0:
            return f"{kb // scale} {unit}"
    return f"{kb} KiB"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def summary(t: Topology) -> str:
    smt = f"SMT{t.threads_per_core}" if t.threads_per_core > 1 else "no SMT"
    return (f"{_n(len(t.packages), 'socket')}, {_n(len(t.nodes), 'NUMA node')}, {_n(len(t.cores), 'core')}, "
            f"{_n(len(t.cpus), 'online CPU')} ({smt})")


def _core_line(t: Topology, core: frozenset[int]) -> str:
    first = t.by_id[min(core)]
    kind = f" [{first.core_type}]" if first.core_type else ""
    cluster = f" cluster {first.cluster}" if first.cluster >= 0 else ""
    return f"core {first.core}{kind}{cluster}: {','.join(map(str, sorted(core)))}"


def show_text(t: Topology) -> str:
    lines = [f"{t.name or '(unnamed)'}: {summary(t)}, smt/control={t.smt_control}"]
    if t.description:
        lines.append(f"  {t.description.strip()}")
    cores_by_node: dict[int, list[frozenset[int]]] = {}
    for core in t.cores:
        cores_by_node.setdefault(t.by_id[min(core)].node, []).append(core)
    nodes = {n.id: n for n in t.nodes}
    for package, cpus in t.packages.items():
        lines.append(f"  socket {package}: CPUs {format_cpulist(cpus)}")
        for node_id in sorted({t.by_id[c].node for c in cpus}):
            n = nodes[node_id]
            lines.append(f"    NUMA node {n.id}: {_size(n.memory_kb)}, distances {' '.join(map(str, n.distances))}, "
                         f"CPUs {format_cpulist(n.cpus)}")
            lines.extend(f"      {_core_line(t, core)}" for core in cores_by_node.get(node_id, ()))
    for n in t.nodes:
        if not n.cpus:
            lines.append(f"  memory node {n.id}: {_size(n.memory_kb)}, no CPUs, "
                         f"distances {' '.join(map(str, n.distances))}")
    lines.append("  caches:")
    kinds: dict[tuple[int, str], list] = {}
    for c in t.caches:
        kinds.setdefault((c.level, c.type), []).append(c)
    for (level, kind), caches in sorted(kinds.items()):
        sizes = sorted({c.size_kb for c in caches})
        shares = sorted({len(c.cpus) for c in caches})
        label = f"L{level}{'d' if kind == 'Data' else 'i' if kind == 'Instruction' else ''}"
        lines.append(f"    {label}: {len(caches)} x {'/'.join(f'{s}K' for s in sizes)}, "
                     f"each shared by {'/'.join(map(str, shares))} CPUs")
    if t.offline_cpus:
        lines.append(f"  offline CPUs: {format_cpulist(t.offline_cpus)}")
    absent = (t.possible_cpus or t.present_cpus) - t.present_cpus
    if absent:
        lines.append(f"  possible but not present CPUs: {format_cpulist(absent)}")
    if t.possible_nodes:
        lines.append(f"  possible NUMA nodes: {format_cpulist(t.possible_nodes)}")
    if t.pci_devices:
        lines.append("  devices:")
        for d in t.pci_devices:
            lines.append(f"    {d.bdf} class {d.pci_class} NUMA node {d.numa_node}, "
                         f"local CPUs {format_cpulist(t.device_local_cpus(d)) or '(none)'}")
    return "\n".join(lines) + "\n"


def to_json(t: Topology) -> dict:
    """A JSON-ready description of the whole model (cpulists as strings)."""
    return {
        "name": t.name,
        "description": t.description,
        "vendor": t.vendor,
        "smt_control": t.smt_control,
        "online_cpus": format_cpulist(t.online_cpus),
        "offline_cpus": format_cpulist(t.offline_cpus),
        "present_cpus": format_cpulist(t.present_cpus),
        "possible_cpus": format_cpulist(t.possible_cpus or t.present_cpus),
        "possible_nodes": format_cpulist(t.possible_nodes or {n.id for n in t.nodes}),
        "cpus": [{"id": c.id, "package": c.package, "die": c.die, "core": c.core, "node": c.node,
                  "cluster": c.cluster, "core_type": c.core_type} for c in t.cpus],
        "cores": [format_cpulist(core) for core in t.cores],
        "nodes": [{"id": n.id, "cpus": format_cpulist(n.cpus), "memory_kb": n.memory_kb,
                   "distances": list(n.distances), "hugepages_2m": n.hugepages_2m, "hugepages_1g": n.hugepages_1g}
                  for n in t.nodes],
        "caches": [{"level": c.level, "type": c.type, "id": c.id, "size_kb": c.size_kb,
                    "cpus": format_cpulist(c.cpus), "line_size": c.line_size} for c in t.caches],
        "pci_devices": [{"bdf": d.bdf, "class": d.pci_class, "numa_node": d.numa_node,
                         "local_cpus": format_cpulist(t.device_local_cpus(d))} for d in t.pci_devices],
    }
