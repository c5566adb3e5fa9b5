"""hwloc, an independent reader of sysfs, sees the same machine as our model in every rendered library topology."""

from __future__ import annotations

import pytest

from cci_conformance.topology import hwloc, library
from cci_conformance.topology.render import render
from cci_conformance.topology.scratch import scratch_dir
from cci_conformance.topology.spec import parse_spec

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not hwloc.available(), reason=f"{hwloc.LSTOPO} is not installed (Debian package hwloc)"),
]


@pytest.mark.parametrize("name", library.names())
def test_hwloc_agrees_with_the_model(name):
    topology = library.load(name)
    with scratch_dir() as root:
        render(topology, root)
        problems = hwloc.compare(topology, root)
    assert problems == [], "\n".join(problems)


def test_hwloc_reads_the_rendered_root_not_the_host():
    # A machine unlike any real host: if lstopo fell back to the real machine, the PU sets would differ.
    topology = parse_spec({"threads_per_core": 4, "packages": [{"count": 3, "nodes": [{"cores": 5}]}]})
    with scratch_dir() as root:
        render(topology, root)
        view = hwloc.parse_view(hwloc.lstopo_xml(root))
    assert view.pus == frozenset(range(60))
    assert len(view.packages) == 3 and len(view.cores) == 15


def test_oracle_detects_a_disagreement():
    machine = {"threads_per_core": 2, "packages": [{"count": 2, "nodes": [{"cores": 2}]}]}
    shown = parse_spec(machine)
    claimed = parse_spec({**machine, "numbering": "amd"})
    with scratch_dir() as root:
        render(shown, root)
        problems = hwloc.compare(claimed, root)
    assert any(p.startswith("cores:") for p in problems)
    assert any(p.startswith("packages:") for p in problems)


def test_parse_bitmap_handles_empty_groups():
    assert hwloc.parse_bitmap("0x00000001,,0x00000003") == {0, 1, 64}
    assert hwloc.parse_bitmap("0x0") == frozenset()
