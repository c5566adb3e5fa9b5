"""Topology spec loading: numbering schemes, defaults, and every class of bad input as a ConfigError."""

from __future__ import annotations

import textwrap

import pytest

from cci_conformance.errors import ConfigError
from cci_conformance.topology.spec import load_spec, parse_spec


def spec_file(tmp_path, text: str):
    path = tmp_path / "machine.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def two_socket(numbering: str, threads: int = 2) -> dict:
    return {"numbering": numbering, "threads_per_core": threads,
            "packages": [{"count": 2, "nodes": [{"cores": 4}]}]}


def test_intel_numbering_puts_siblings_half_the_machine_apart():
    t = parse_spec(two_socket("intel"))
    assert t.cores[0] == {0, 8}
    assert t.node_cpus == {0: {0, 1, 2, 3, 8, 9, 10, 11}, 1: {4, 5, 6, 7, 12, 13, 14, 15}}
    assert t.packages[1] == {4, 5, 6, 7, 12, 13, 14, 15}


def test_amd_numbering_puts_siblings_next_to_each_other():
    t = parse_spec(two_socket("amd"))
    assert t.cores[:2] == (frozenset({0, 1}), frozenset({2, 3}))
    assert t.node_cpus[1] == frozenset(range(8, 16))
    assert t.vendor == "amd"


def test_smt4_intel_numbering():
    t = parse_spec(two_socket("intel", threads=4))
    assert t.core_of[0] == {0, 8, 16, 24}
    assert t.threads_per_core == 4


def test_explicit_numbering_gives_first_threads_the_low_half_of_each_node():
    t = parse_spec({"numbering": "explicit", "threads_per_core": 2, "packages": [{"nodes": [
        {"cores": 2, "cpus": "0,5,10,15"}, {"cores": 2, "cpus": "1-2,11-12"}]}]})
    assert t.core_of[0] == {0, 10} and t.core_of[5] == {5, 15}
    assert t.node_cpus == {0: {0, 5, 10, 15}, 1: {1, 2, 11, 12}}


def test_defaults_one_node_no_smt_standard_caches():
    t = parse_spec({"packages": [{"nodes": [{"cores": 4}]}]})
    assert len(t.cpus) == 4 and t.smt_control == "notsupported"
    assert {(c.level, c.type) for c in t.caches} == {(1, "Data"), (1, "Instruction"), (2, "Unified"), (3, "Unified")}
    assert t.l3_groups() == (frozenset(range(4)),)
    assert t.nodes[0].memory_kb == 16 * 1024 * 1024 and t.nodes[0].distances == (10,)


def test_hybrid_groups_types_clusters_and_shared_l2():
    t = parse_spec({"numbering": "amd", "packages": [{"nodes": [{"cores": [
        {"type": "p", "count": 2, "threads": 2},
        {"type": "e", "count": 4, "threads": 1, "cores_per_cluster": 4, "l2": {"size": "2M", "per": "cluster"}},
    ]}]}]})
    assert t.core_types == {"p": frozenset(range(4)), "e": frozenset(range(4, 8))}
    l2 = [c for c in t.caches if c.level == 2]
    assert {c.cpus for c in l2} == {frozenset({0, 1}), frozenset({2, 3}), frozenset(range(4, 8))}
    assert {t.by_id[i].cluster for i in range(4, 8)} == {0}


def test_sub_numa_clustering_default_distances_and_dies():
    t = parse_spec({"packages": [{"count": 2, "dies": 2, "nodes": [{"count": 2, "cores": 2}]}]})
    assert [n.distances for n in t.nodes][0] == (10, 11, 21, 21)
    assert {t.by_id[c].die for c in t.node_cpus[1]} == {1}


def test_offline_not_present_and_possible():
    t = parse_spec({"threads_per_core": 2, "packages": [{"nodes": [{"cores": 4}]}],
                    "offline": "1", "not_present": "3,7", "possible": "0-11"})
    assert t.online_cpus == {0, 2, 4, 5, 6} and t.offline_cpus == {1}
    assert t.present_cpus == {0, 1, 2, 4, 5, 6} and t.possible_cpus == frozenset(range(12))
    assert t.nr_cpu_ids == 12


def test_memory_nodes_hugepages_devices():
    t = parse_spec({"packages": [{"nodes": [{"cores": 2, "memory": "8G", "hugepages": {"2M": 4, "1G": 1}}]}],
                    "memory_nodes": [{"memory": "1T"}], "possible_nodes": "0-3",
                    "devices": [{"bdf": "0000:3b:00.0", "node": 0},
                                {"bdf": "0000:3c:00.0", "class": "gpu", "node": 1}]})
    assert [n.cpus for n in t.nodes] == [frozenset({0, 1}), frozenset()]
    assert t.nodes[1].memory_kb == 1024**3 and t.nodes[0].hugepages_2m == 4 and t.nodes[0].hugepages_1g == 1
    assert t.nodes[0].distances == (10, 20)
    assert t.possible_nodes == {0, 1, 2, 3}
    assert t.device("0000:3c:00.0").pci_class == "0x030200"


BAD_SPECS = [
    ("packages:\n  - nodes:\n      - corse: 4\n", "packages[0].nodes[0].corse", "did you mean 'cores'"),
    ("packages:\n  - dies: 3\n    nodes: [{cores: 2, count: 2}]\n", "packages[0].dies", "divide"),
    ("packages:\n  - nodes: [{cores: [{count: 6, cores_per_cluster: 4}]}]\n",
     "packages[0].nodes[0].cores[0].cores_per_cluster", "divide"),
    ("packages:\n  - count: 2\n    nodes: [{cores: 6}]\ncaches: {l3: {size: 8M, per: 4}}\n", "caches.l3.per", "divide"),
    ("numbering: explicit\npackages:\n  - nodes: [{cores: 2, cpus: '0-1'}, {cores: 2, cpus: '1-2'}]\n",
     "packages[0].nodes[1].cpus", "overlap"),
    ("numbering: explicit\npackages:\n  - nodes: [{cores: 2, cpus: '0-2'}]\n",
     "packages[0].nodes[0].cpus", "2 threads"),
    ("packages:\n  - nodes: [{cores: 2, cpus: '0-1'}]\n", "packages[0].nodes[0].cpus", "explicit"),
    ("packages:\n  - nodes: [{cores: 2}, {cores: 2}]\ndistances: [[10, 21]]\n", "distances", "rows"),
    ("packages:\n  - nodes: [{cores: 2}, {cores: 2}]\ndistances: [[10, 21], [31, 10]]\n",
     "distances[0][1]", "symmetric"),
    ("packages:\n  - nodes: [{cores: 2}, {cores: 2}]\ndistances: [[11, 21], [21, 10]]\n", "distances[0][0]", "not 10"),
    ("packages:\n  - nodes: [{cores: 2}]\ndevices: [{bdf: '0000:3b:00.0', node: 4}]\n",
     "devices[0].node", "does not exist"),
    ("packages:\n  - nodes: [{cores: 2}]\ndevices: [{bdf: '0000:3b:00.0', node: 0}, {bdf: '0000:3b:00.0', node: 0}]\n",
     "devices[1].bdf", "twice"),
    ("packages:\n  - nodes: [{cores: 2}]\noffline: '0'\n", "offline", "boot CPU"),
    ("packages:\n  - nodes: [{cores: 2}]\noffline: '5'\n", "offline", "not CPUs of this machine"),
    ("threads_per_core: 2\npackages:\n  - nodes: [{cores: 2}]\nsmt_control: notsupported\n", "smt_control", "threads"),
    ("threads_per_core: 3\npackages:\n  - nodes: [{cores: 2}]\n", "threads_per_core", "one of"),
    ("packages:\n  - nodes: [{cores: 2, memory: 6Q}]\n", "packages[0].nodes[0].memory", "64G"),
    ("packages: []\n", "packages", "range"),
    ("{}\n", "(top level)", "add 'packages'"),
    ("packages: [{nodes: [{cores: 1}]}]\nnodes: 4\n", "nodes", "unknown key"),
    ("- 1\n", "(top level)", "mapping"),
    ("packages: [\n", "line", "YAML"),
]


@pytest.mark.parametrize(("text", "field", "hint"), BAD_SPECS, ids=[b[1] + ":" + b[2] for b in BAD_SPECS])
def test_bad_specs_name_file_field_and_fix(tmp_path, text, field, hint):
    path = spec_file(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_spec(path)
    err = info.value
    assert err.file == str(path)
    assert err.field is not None and err.field.startswith(field), str(err)
    assert err.fix, str(err)
    assert hint in str(err), str(err)
    assert "\n" not in str(err)


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_spec(tmp_path / "nope.yaml")


def test_name_defaults_to_file_stem(tmp_path):
    assert load_spec(spec_file(tmp_path, "packages: [{nodes: [{cores: 1}]}]\n")).name == "machine"
