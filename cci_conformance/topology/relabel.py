"""Map a topology onto real CPU ids, so that its cpusets can be written into real cgroups."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from ..errors import ConfigError
from .canonical import canonical
from .model import Cache, NumaNode, Topology


def relabel_map(topology: Topology, real_cpus: Iterable[int]) -> dict[int, int]:
    """Old id -> new id: the i-th online CPU becomes the i-th lowest real CPU (order kept); offline and
    not-present ids, which never reach a cgroup, follow above the highest real id, in order."""
    real = sorted(set(real_cpus))
    if any(c < 0 for c in real):
        raise ConfigError(f"negative CPU id in {real}", field="real CPUs", fix="give the host's online CPU ids")
    online = sorted(topology.online_cpus)
    if len(real) < len(online):
        raise ConfigError(
            f"topology {topology.name or '(unnamed)'} has {len(online)} online CPUs but only {len(real)} real CPUs "
            "are available", field="real CPUs", fix="use a smaller topology or a host (or cpuset) with more CPUs")
    mapping = dict(zip(online, real, strict=False))
    rest = sorted((topology.possible_cpus or topology.present_cpus) - topology.online_cpus)
    top = real[-1] if real else -1
    mapping.update({old: top + 1 + i for i, old in enumerate(rest)})
    return mapping


def relabel(topology: Topology, real_cpus: Iterable[int]) -> Topology:
    """The same machine with every CPU id renumbered onto ``real_cpus`` (see ``relabel_map``).

    Cores, packages, nodes, caches and device locality are renumbered consistently; ConfigError when
    there are fewer real CPUs than online CPUs in the topology.
    """
    m = relabel_map(topology, real_cpus)

    def ids(cpus: Iterable[int]) -> frozenset[int]:
        return frozenset(m[c] for c in cpus)

    return canonical(replace(
        topology,
        cpus=tuple(replace(c, id=m[c.id]) for c in topology.cpus),
        nodes=tuple(NumaNode(n.id, ids(n.cpus), n.memory_kb, n.distances, n.hugepages_2m, n.hugepages_1g)
                    for n in topology.nodes),
        caches=tuple(Cache(c.level, c.type, c.id, c.size_kb, ids(c.cpus), c.line_size) for c in topology.caches),
        offline_cpus=ids(topology.offline_cpus),
        possible_cpus=ids(topology.possible_cpus),
    ))
