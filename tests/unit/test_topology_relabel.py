"""Relabelling a topology onto real CPU ids keeps its shape and renumbers everything consistently."""

from __future__ import annotations

import pytest

from cci_conformance.errors import ConfigError
from cci_conformance.topology import library
from cci_conformance.topology.relabel import relabel, relabel_map
from cci_conformance.topology.render import render
from cci_conformance.topology.scratch import scratch_dir
from cci_conformance.topology.spec import parse_spec
from cci_conformance.topology.sysfs_reader import read_sysfs


def test_order_preserving_onto_sparse_real_ids():
    t = parse_spec({"threads_per_core": 2, "packages": [{"nodes": [{"cores": 2}]}]})  # cores {0,2} {1,3}
    real = [3, 9, 4, 12, 20]
    r = relabel(t, real)
    assert r.online_cpus == {3, 4, 9, 12}
    assert r.cores == (frozenset({3, 9}), frozenset({4, 12}))
    assert r.nodes[0].cpus == {3, 4, 9, 12}
    assert {c.cpus for c in r.caches if c.level == 1} == {frozenset({3, 9}), frozenset({4, 12})}
    assert [c.core for c in r.cpus] == [c.core for c in t.cpus]


def test_devices_follow_their_node():
    t = library.load("server-2s8c-smt2-intel")
    real = list(range(100, 132))
    r = relabel(t, real)
    dev = r.device("0000:b1:00.0")
    assert r.device_local_cpus(dev) == {c + 100 for c in t.node_cpus[1]}


def test_offline_and_not_present_go_above_the_real_ids():
    t = library.load("sparse-offline")
    m = relabel_map(t, range(64, 80))
    assert [m[c] for c in sorted(t.online_cpus)] == list(range(64, 64 + len(t.online_cpus)))
    r = relabel(t, range(64, 80))
    assert min(r.offline_cpus) > 79 and len(r.offline_cpus) == len(t.offline_cpus)
    assert len(r.possible_cpus) == len(t.possible_cpus)


def test_shape_survives_and_renders(tmp_path):
    t = library.load("hybrid-8p8e")
    r = relabel(t, [i * 2 for i in range(30)])
    assert sorted(len(c) for c in r.cores) == sorted(len(c) for c in t.cores)
    assert {k: len(v) for k, v in r.core_types.items()} == {k: len(v) for k, v in t.core_types.items()}
    with scratch_dir() as root:
        render(r, root)
        assert read_sysfs(root / "sys", name=r.name) == r


def test_too_few_real_cpus():
    t = library.load("laptop-1s4c-smt2")
    with pytest.raises(ConfigError, match="8 online CPUs but only 2 real CPUs"):
        relabel(t, [0, 1])
