"""Registration: the driver publishes the CPUs the node may hand out, with the machine's topology."""

from __future__ import annotations

import pytest

from cci_conformance.dra.checks import fmt


@pytest.mark.requirement("REG-601")
def test_slices_are_the_online_cpus_minus_the_reserved(dra):
    """The driver's ResourceSlices MUST publish exactly the node's online CPUs minus the reserved ones, each with
    its NUMA node, socket and core as sysfs gives them (grouped mode: a device per NUMA node whose capacity is
    that node's CPUs)."""
    if dra.device_mode == "grouped":
        _assert_group_devices(dra)
        return
    devices = dra.slices()
    cpus = [d.cpu for d in devices if d.cpu is not None]
    want = dra.topology.online_cpus - dra.profile.reserved
    assert len(cpus) == len(set(cpus)), f"a CPU is published twice: {sorted(cpus)}"
    assert frozenset(cpus) == want, f"devices cover {fmt(frozenset(cpus))}; online - reserved is {fmt(want)}"
    by_id = dra.topology.by_id
    wrong = [f"{d.name}: numa {d.numa_node} socket {d.socket} core {d.core}, sysfs says numa {by_id[d.cpu].node} "
             f"socket {by_id[d.cpu].package} core {by_id[d.cpu].core}" for d in devices if d.cpu in by_id and
             (d.numa_node, d.socket, d.core) != (by_id[d.cpu].node, by_id[d.cpu].package, by_id[d.cpu].core)]
    assert not wrong, "; ".join(wrong[:5])


def _assert_group_devices(dra) -> None:
    devices = dra.slices()
    reserved = dra.profile.reserved
    # every NUMA node with a CPU to hand out, its count of them (the capacity claims consume)
    want = {node: len(cpus & dra.topology.online_cpus - reserved) for node, cpus in dra.topology.node_cpus.items()
            if cpus & dra.topology.online_cpus - reserved}
    plain = [d.name for d in devices if d.capacity is None]
    assert not plain, f"grouped mode, yet devices {plain[:5]} have no CPU capacity (a device per CPU?)"
    nodes = [d.numa_node for d in devices]
    assert len(nodes) == len(set(nodes)), f"a NUMA node is published twice: {nodes}"
    have = {d.numa_node: d.capacity for d in devices}
    free = dra.topology.online_cpus - reserved
    assert have == want, f"group devices publish {have} CPUs per NUMA node; online - reserved {fmt(free)} is {want}"
    by_id = dra.topology.by_id
    packages = {node: {by_id[c].package for c in cpus} for node, cpus in dra.topology.node_cpus.items()}
    wrong = [f"{d.name}: numa {d.numa_node} socket {d.socket}, sysfs puts that node on socket(s) "
             f"{sorted(packages.get(d.numa_node, ()))}" for d in devices
             if d.socket not in packages.get(d.numa_node, ())]
    assert not wrong, "; ".join(wrong[:5])
