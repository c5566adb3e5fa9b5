"""Independent oracle: what hwloc (lstopo) sees in a rendered root, compared with our model."""

from __future__ import annotations

import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass, replace
from pathlib import Path

from ..cpuset import parse_cpumask
from .model import Topology

LSTOPO = "lstopo-no-graphics"
TIMEOUT_S = 60


class HwlocError(RuntimeError):
    """lstopo failed or printed something we cannot read."""


@dataclass(frozen=True)
class HwlocView:
    """The parts of a machine that hwloc and our model must agree on (sets of CPU-id sets)."""

    packages: frozenset[frozenset[int]]
    numa_nodes: dict[int, frozenset[int]]  # os_index -> CPUs
    cores: frozenset[frozenset[int]]
    pus: frozenset[int]
    l3_groups: frozenset[frozenset[int]]


def available() -> bool:
    return shutil.which(LSTOPO) is not None


def parse_bitmap(text: str) -> frozenset[int]:
    """hwloc's bitmap string (``0x000000ff,0xffffffff``, most significant 32-bit group first)."""
    # An empty group between commas ("0x1,,0x2") is a zero group.
    groups = [g.strip().removeprefix("0x") for g in text.strip().split(",")]
    return parse_cpumask("".join(g.rjust(8, "0") for g in groups))


def lstopo_xml(root: Path) -> str:
    """Run lstopo on a rendered filesystem root and return its XML export."""
    # An empty environment apart from PATH: no HWLOC_* variable of the caller may redirect discovery.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    cmd = [LSTOPO, "--input", str(root), "--if", "fsroot", "--of", "xml", "-"]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise HwlocError(f"{LSTOPO} did not finish within {TIMEOUT_S}s on {root}") from None
    if proc.returncode != 0:
        raise HwlocError(f"{LSTOPO} failed ({proc.returncode}) on {root}: {proc.stderr.strip()}")
    return proc.stdout


def parse_view(xml_text: str) -> HwlocView:
    try:
        tree = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise HwlocError(f"unreadable lstopo XML: {exc}") from None
    packages, cores, l3 = set(), set(), set()
    nodes: dict[int, frozenset[int]] = {}
    pus: set[int] = set()
    for obj in tree.iter("object"):
        kind = obj.get("type")
        cpus = parse_bitmap(obj.get("cpuset", "0x0"))
        if kind == "Package":
            packages.add(cpus)
        elif kind == "Core":
            cores.add(cpus)
        elif kind == "L3Cache":
            l3.add(cpus)
        elif kind == "NUMANode":
            nodes[int(obj.get("os_index", "-1"))] = cpus
        elif kind == "PU":
            pus.add(int(obj.get("os_index", "-1")))
    return HwlocView(frozenset(packages), nodes, frozenset(cores), frozenset(pus), frozenset(l3))


def view_of(topology: Topology) -> HwlocView:
    """Our model, seen the way hwloc reports it."""
    return HwlocView(
        packages=frozenset(topology.packages.values()),
        numa_nodes={n.id: n.cpus for n in topology.nodes},
        cores=frozenset(topology.cores),
        pus=topology.online_cpus,
        l3_groups=frozenset(topology.l3_groups()),
    )


def compare(topology: Topology, root: Path) -> list[str]:
    """Differences between hwloc's view of the rendered ``root`` and ``topology``; empty when they agree."""
    theirs, ours = parse_view(lstopo_xml(root)), view_of(topology)
    # hwloc gives a CPU-less memory node the cpuset of the place it attaches it to (its locality),
    # so for those nodes only their existence is comparable.
    cpuless = {n for n, cpus in ours.numa_nodes.items() if not cpus}
    theirs = replace(theirs, numa_nodes={n: (frozenset() if n in cpuless else c) for n, c in theirs.numa_nodes.items()})
    problems = []
    for name in ("pus", "packages", "numa_nodes", "cores", "l3_groups"):
        a, b = getattr(theirs, name), getattr(ours, name)
        if a != b:
            problems.append(f"{name}: hwloc sees {_brief(a)}, the model has {_brief(b)}")
    return problems


def _brief(value) -> str:
    from ..cpuset import format_cpulist

    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {format_cpulist(v)}" for k, v in sorted(value.items())) + "}"
    if value and isinstance(next(iter(value)), frozenset):
        return "[" + " | ".join(format_cpulist(s) for s in sorted(value, key=lambda s: min(s, default=-1))) + "]"
    return format_cpulist(value)
