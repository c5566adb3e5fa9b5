"""The rendered tree: the files, links and exact kernel formats each consumer reads."""

from __future__ import annotations

import os
import re

import pytest

from cci_conformance.cpuset import parse_cpulist, parse_cpumask
from cci_conformance.errors import ConfigError
from cci_conformance.topology import library
from cci_conformance.topology.render import render
from cci_conformance.topology.scratch import scratch_dir
from cci_conformance.topology.spec import parse_spec


@pytest.fixture
def tmp_path():
    """Render into a memory filesystem where there is one: creating many small files on disk is slow."""
    with scratch_dir() as path:
        yield path


def read(path) -> str:
    return path.read_text()


@pytest.fixture(scope="module")
def snc():
    with scratch_dir() as root:
        yield library.load("server-2s-snc4"), render(library.load("server-2s-snc4"), root)


def test_cpu_root_files(snc):
    _, root = snc
    cpu = root / "sys/devices/system/cpu"
    assert read(cpu / "online") == "0-79\n"
    assert read(cpu / "possible") == "0-79\n" and read(cpu / "present") == "0-79\n"
    assert read(cpu / "offline") == "\n"
    assert read(cpu / "kernel_max") == "8191\n"
    assert read(cpu / "smt/control") == "on\n" and read(cpu / "smt/active") == "1\n"


def test_topology_files_and_mask_width(snc):
    _, root = snc
    topo = root / "sys/devices/system/cpu/cpu0/topology"
    assert read(topo / "core_cpus_list") == "0,40\n" == read(topo / "thread_siblings_list")
    # 80 CPUs: masks are ceil(80/4) = 20 hex digits in 32-bit groups, as in the real SNC capture.
    assert read(topo / "core_cpus") == "0000,00000100,00000001\n" == read(topo / "thread_siblings")
    assert read(topo / "package_cpus_list") == "0-19,40-59\n" == read(topo / "core_siblings_list")
    assert parse_cpumask(read(topo / "package_cpus")) == parse_cpulist("0-19,40-59")
    assert read(topo / "physical_package_id") == "0\n" and read(topo / "die_id") == "0\n"
    assert read(topo / "cluster_id") == "65535\n"
    assert read(topo / "die_cpus_list") == "0-19,40-59\n"


def test_node_files_non_contiguous_and_possible_larger(snc):
    t, root = snc
    node = root / "sys/devices/system/node"
    assert read(node / "online") == "0-3\n" and read(node / "possible") == "0-5\n"
    assert read(node / "has_cpu") == "0-3\n"
    assert read(node / "node0/cpulist") == "0-2,5-6,10-12,15-16,40-42,45-46,50-52,55-56\n"
    assert parse_cpumask(read(node / "node0/cpumap")) == t.node_cpus[0]
    assert read(node / "node0/distance") == "10 11 21 21\n"
    meminfo = read(node / "node1/meminfo").splitlines()
    assert meminfo[0] == f"Node 1 MemTotal:       {48 * 1024 * 1024:>8} kB"
    assert all(re.fullmatch(r"Node 1 [A-Za-z_]+:\s+\d+( kB)?", line) for line in meminfo)
    huge = node / "node0/hugepages"
    assert sorted(os.listdir(huge)) == ["hugepages-1048576kB", "hugepages-2048kB"]
    assert read(huge / "hugepages-2048kB/nr_hugepages") == "0\n"


def test_symlinks_both_ways(snc):
    t, root = snc
    sys = root / "sys/devices/system"
    assert os.readlink(sys / "cpu/cpu3/node1") == "../../node/node1"
    assert os.readlink(sys / "node/node1/cpu3") == "../../cpu/cpu3"
    assert (sys / "cpu/cpu3/node1/cpulist").read_text() == read(sys / "node/node1/cpulist")
    links = {e for e in os.listdir(sys / "node/node2") if e.startswith("cpu") and e[3:].isdigit()}
    assert links == {f"cpu{c}" for c in t.node_cpus[2]}


def test_cache_files(snc):
    _, root = snc
    cache = root / "sys/devices/system/cpu/cpu41/cache"
    assert [read(cache / f"index{i}/type").strip() for i in range(4)] == ["Data", "Instruction", "Unified", "Unified"]
    assert [read(cache / f"index{i}/level").strip() for i in range(4)] == ["1", "1", "2", "3"]
    assert read(cache / "index3/size") == "28160K\n"
    assert read(cache / "index3/shared_cpu_list") == "0-19,40-59\n"
    assert read(cache / "index0/shared_cpu_list") == "1,41\n"
    assert read(cache / "index0/coherency_line_size") == "64\n"
    assert parse_cpumask(read(cache / "index3/shared_cpu_map")) == parse_cpulist("0-19,40-59")


def test_cpu0_has_no_online_file_others_do(snc):
    _, root = snc
    cpu = root / "sys/devices/system/cpu"
    assert not (cpu / "cpu0/online").exists()
    assert read(cpu / "cpu1/online") == "1\n"


def test_pci_devices(snc):
    t, root = snc
    dev = root / "sys/bus/pci/devices/0000:3b:00.0"
    assert os.path.islink(dev)
    assert read(dev / "numa_node") == "1\n" and read(dev / "class") == "0x010802\n"
    assert parse_cpulist(read(dev / "local_cpulist")) == t.node_cpus[1]
    assert parse_cpumask(read(dev / "local_cpus")) == t.node_cpus[1]


def test_cpuinfo_agrees_with_the_tree(snc):
    t, root = snc
    blocks = [b for b in read(root / "proc/cpuinfo").split("\n\n") if b.strip()]
    assert len(blocks) == len(t.cpus)
    for block in blocks:
        fields = dict((k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in block.splitlines()))
        cpu = t.by_id[int(fields["processor"])]
        assert int(fields["physical id"]) == cpu.package and int(fields["core id"]) == cpu.core
        assert int(fields["siblings"]) == 40 and int(fields["cpu cores"]) == 20
        assert fields["vendor_id"] == "GenuineIntel" and " ht " in f" {fields['flags']} "
    lines = read(root / "proc/cpuinfo").splitlines()
    apicids = [int(line.split(":")[1]) for line in lines if line.startswith("apicid")]
    assert len(set(apicids)) == len(apicids)


def test_offline_and_not_present_cpus(tmp_path):
    t = library.load("sparse-offline")
    root = render(t, tmp_path)
    cpu = root / "sys/devices/system/cpu"
    assert read(cpu / "online") == "0-2,4-6,8-11,13-14\n"
    assert read(cpu / "present") == "0-6,8-14\n" and read(cpu / "possible") == "0-23\n"
    assert read(cpu / "offline") == "3,7,12,15-23\n"
    assert read(cpu / "cpu3/online") == "0\n" and not (cpu / "cpu3/topology").exists()
    assert not (cpu / "cpu7").exists() and not (cpu / "cpu20").exists()
    # masks are as wide as possible CPUs (24 -> 6 digits); the sibling of an offline CPU stands alone
    assert read(cpu / "cpu12/online") == "0\n"
    assert read(cpu / "cpu2/topology/core_cpus") == "000404\n"
    assert read(cpu / "cpu4/topology/core_cpus") == "000010\n"
    assert read(cpu / "cpu4/topology/core_cpus_list") == "4\n"


def test_nosmt_and_hybrid_files(tmp_path):
    root = render(library.load("server-2s-nosmt"), tmp_path / "a")
    assert read(root / "sys/devices/system/cpu/smt/control") == "notsupported\n"
    assert read(root / "sys/devices/system/cpu/smt/active") == "0\n"
    assert " ht " not in read(root / "proc/cpuinfo")
    root = render(library.load("hybrid-8p8e"), tmp_path / "b")
    assert read(root / "sys/devices/cpu_core/cpus") == "0-15\n"
    assert read(root / "sys/devices/cpu_atom/cpus") == "16-23\n"
    assert read(root / "sys/devices/system/cpu/cpu16/topology/cluster_cpus_list") == "16-19\n"


def test_cpuless_memory_nodes(tmp_path):
    root = render(library.load("memory-tiers-cxl"), tmp_path)
    node = root / "sys/devices/system/node"
    assert read(node / "has_cpu") == "0-1\n" and read(node / "has_memory") == "0-3\n"
    assert read(node / "node2/cpulist") == "\n"
    assert read(node / "node2/cpumap") == "00000000\n"


def test_rerender_replaces_only_our_own_root(tmp_path):
    t = parse_spec({"packages": [{"nodes": [{"cores": 2}]}]})
    render(t, tmp_path)
    render(t, tmp_path)  # same directory again: allowed, replaced
    foreign = tmp_path / "foreign"
    (foreign / "sys").mkdir(parents=True)
    with pytest.raises(ConfigError, match="not rendered by cci-conformance"):
        render(t, foreign)


def test_writable_files_are_independent_of_each_other(snc):
    # Read-only attributes share content through hard links; files a test may rewrite must not.
    _, root = snc
    cpu = root / "sys/devices/system/cpu"
    assert os.stat(cpu / "cpu1/online").st_nlink == 1
    assert os.stat(root / "sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages").st_nlink == 1
    assert os.stat(cpu / "cpu1/topology/die_id").st_nlink > 1
