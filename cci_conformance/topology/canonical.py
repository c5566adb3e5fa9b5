"""One normal form for Topology values, so that a loaded spec and a read-back tree compare equal."""

from __future__ import annotations

from dataclasses import replace

from .model import Topology


def canonical(topology: Topology) -> Topology:
    """Sort every collection and drop ``possible_*`` sets that add nothing (the model's "empty means same")."""
    cpus = tuple(sorted(topology.cpus))
    nodes = tuple(sorted(topology.nodes, key=lambda n: n.id))
    caches = tuple(sorted(topology.caches, key=lambda c: (c.level, c.type, c.id, min(c.cpus, default=-1))))
    devices = tuple(sorted(topology.pci_devices, key=lambda d: d.bdf))
    present = frozenset(c.id for c in cpus) | frozenset(topology.offline_cpus)
    possible = frozenset(topology.possible_cpus)
    if possible == present:
        possible = frozenset()
    node_ids = frozenset(n.id for n in nodes)
    possible_nodes = frozenset(topology.possible_nodes)
    if possible_nodes == node_ids:
        possible_nodes = frozenset()
    return replace(
        topology,
        cpus=cpus,
        nodes=nodes,
        caches=caches,
        pci_devices=devices,
        offline_cpus=frozenset(topology.offline_cpus),
        possible_cpus=possible,
        possible_nodes=possible_nodes,
    )
