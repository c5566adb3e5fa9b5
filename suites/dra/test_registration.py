"""Registration: the driver publishes one device per CPU the node may hand out, with the machine's topology."""

from __future__ import annotations

import pytest

from cci_conformance.dra.checks import fmt


@pytest.mark.requirement("REG-601")
def test_slices_are_the_online_cpus_minus_the_reserved(dra):
    """The driver's ResourceSlices MUST publish exactly the node's online CPUs minus the reserved ones, each with
    its NUMA node, socket and core as sysfs gives them."""
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
