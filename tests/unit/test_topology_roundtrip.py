"""read_sysfs(render(spec)) equals the spec's Topology: every library machine, and generated specs."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cci_conformance.cpuset import format_cpulist
from cci_conformance.topology import library
from cci_conformance.topology.render import render
from cci_conformance.topology.scratch import scratch_dir
from cci_conformance.topology.spec import parse_spec
from cci_conformance.topology.sysfs_reader import read_sysfs


def roundtrip(topology):
    with scratch_dir() as root:
        render(topology, root)
        return read_sysfs(root / "sys", name=topology.name)


def differences(a, b) -> list[str]:
    fields = ("cpus", "nodes", "caches", "pci_devices", "offline_cpus", "possible_cpus", "possible_nodes",
              "smt_control", "name")
    return [f"{f}: {getattr(a, f)!r} != {getattr(b, f)!r}" for f in fields if getattr(a, f) != getattr(b, f)]


@pytest.mark.parametrize("name", library.names())
def test_library_topology_reads_back_equal(name):
    topology = library.load(name)
    back = roundtrip(topology)
    assert back == topology, differences(back, topology)
    assert back.vendor == topology.vendor


def test_library_has_every_agreed_machine():
    expected = {"laptop-1s4c-smt2", "server-2s8c-smt2-intel", "server-2s8c-smt2-amd", "server-2s-snc4",
                "server-4s16c-smt2", "hybrid-8p8e", "server-2s-nosmt", "memory-tiers-cxl", "sparse-offline",
                "smt4-2s", "scale-8s-1024"}
    assert expected <= set(library.names())


@pytest.mark.parametrize("name", library.names())
def test_library_topology_has_a_device_on_every_cpu_node(name):
    topology = library.load(name)
    assert set(topology.node_cpus) <= {d.numa_node for d in topology.pci_devices}


def test_library_shapes():
    assert len(library.load("server-4s16c-smt2").cpus) == 128
    assert len(library.load("scale-8s-1024").cpus) == 1024
    snc = library.load("server-2s-snc4")
    assert len(snc.nodes) == 4 and snc.possible_nodes > {n.id for n in snc.nodes}
    assert any("," in format_cpulist(cpus) for cpus in snc.node_cpus.values())
    cxl = library.load("memory-tiers-cxl")
    assert [n.id for n in cxl.nodes if not n.cpus] == [2, 3]
    sparse = library.load("sparse-offline")
    assert sparse.offline_cpus and sparse.possible_cpus - sparse.present_cpus
    assert library.load("server-2s-nosmt").smt_control == "notsupported"
    hybrid = library.load("hybrid-8p8e")
    assert {k: len(v) for k, v in hybrid.core_types.items()} == {"p": 16, "e": 8}
    assert library.load("smt4-2s").threads_per_core == 4
    rows = [n.distances for n in library.load("server-4s16c-smt2").nodes]
    assert len({d for row in rows for d in row}) > 2  # not a flat local/remote matrix


# ---- generated specs ----
CACHE_PER = st.sampled_from(["core", "cluster", "node", "die", "package", 1])


@st.composite
def specs(draw) -> dict:
    numbering = draw(st.sampled_from(["intel", "amd", "explicit"]))
    threads = draw(st.sampled_from([1, 2, 4]))
    hybrid = draw(st.booleans())
    packages, node_threads = [], []
    for _ in range(draw(st.integers(1, 2))):
        node_count = draw(st.integers(1, 2))
        dies = draw(st.sampled_from([1, node_count, 2 * node_count]))
        cores = draw(st.integers(1, 3)) * (2 if dies > node_count else 1)
        if hybrid:
            cores_spec = [{"type": "p", "count": cores, "threads": threads},
                          {"type": "e", "count": 2, "threads": 1, "cores_per_cluster": draw(st.sampled_from([1, 2])),
                           "l2": {"size": "2M", "per": "cluster"}}]
            if dies > node_count:
                cores_spec[1]["count"] = 2 * draw(st.integers(1, 2))
            per_node = cores * threads + cores_spec[1]["count"]
        else:
            cores_spec, per_node = cores, cores * threads
        # One package entry per package here so that explicit numbering can name every node.
        nodes = [{"cores": cores_spec, "memory": draw(st.integers(0, 1 << 24)),
                  "hugepages": {"2M": draw(st.integers(0, 8)), "1G": draw(st.integers(0, 2))}}
                 for _ in range(node_count)]
        node_threads.extend([per_node] * node_count)
        packages.append({"dies": dies, "nodes": nodes})
    spec: dict = {"numbering": numbering, "threads_per_core": threads, "packages": packages}
    total = sum(node_threads)
    if numbering == "explicit":
        ids = list(range(total + draw(st.integers(0, 4))))
        random.Random(draw(st.integers(0, 1 << 30))).shuffle(ids)
        ids = [0] + [i for i in ids if i != 0]  # keep cpu 0 (the boot CPU) in the machine
        start = 0
        for pkg in packages:
            for node in pkg["nodes"]:
                node["cpus"] = format_cpulist(ids[start:start + node_threads[0]])
                start += node_threads[0]
                node_threads.pop(0)
        numbered = ids[:start]
    else:
        numbered = list(range(total))
    others = sorted(set(numbered) - {0})
    holes = draw(st.lists(st.sampled_from(others), unique=True, max_size=3)) if others else []
    split = draw(st.integers(0, len(holes)))
    if holes[:split]:
        spec["offline"] = format_cpulist(holes[:split])
    if holes[split:]:
        spec["not_present"] = format_cpulist(holes[split:])
    if draw(st.booleans()):
        spec["possible"] = f"0-{max(numbered) + draw(st.integers(0, 40))}"
    if draw(st.booleans()):
        spec["caches"] = {key: {"size": draw(st.sampled_from(["32K", "1M", "6M"])), "per": draw(CACHE_PER)}
                          for key in draw(st.lists(st.sampled_from(["l1d", "l1i", "l2", "l3"]), unique=True))}
    n_nodes = len(node_threads) if numbering != "explicit" else sum(len(p["nodes"]) for p in packages)
    mem_nodes = draw(st.integers(0, 2))
    if mem_nodes:
        spec["memory_nodes"] = [{"count": mem_nodes, "memory": "4G"}]
        spec["possible_nodes"] = f"0-{n_nodes + mem_nodes + draw(st.integers(0, 3))}"
    spec["devices"] = [{"bdf": f"0000:{i + 1:02x}:00.0", "node": draw(st.integers(-1, n_nodes + mem_nodes - 1)),
                        "class": draw(st.sampled_from(["nic", "gpu", "0x010802"]))}
                       for i in range(draw(st.integers(0, 3)))]
    return spec


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs())
def test_generated_specs_read_back_equal(spec):
    topology = parse_spec(spec, default_name="generated")
    back = roundtrip(topology)
    assert back == topology, differences(back, topology)
