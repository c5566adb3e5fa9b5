"""The sysfs reader on this machine's real /sys, and on broken or minimal trees."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cci_conformance.cpuset import parse_cpulist
from cci_conformance.errors import ConfigError
from cci_conformance.topology.sysfs_reader import read_sysfs

REAL_SYS = Path("/sys")


@pytest.mark.skipif(not (REAL_SYS / "devices/system/cpu/online").exists(), reason="no /sys on this machine")
def test_reads_the_real_sys_consistently():
    t = read_sysfs(REAL_SYS, name="host")
    online = parse_cpulist((REAL_SYS / "devices/system/cpu/online").read_text())
    assert t.online_cpus == online
    assert os.sched_getaffinity(0) <= t.online_cpus  # a cpuset may restrict us, never widen
    assert len(t.cpus) == os.sysconf("SC_NPROCESSORS_ONLN")
    assert set().union(*t.cores) == set(online)
    assert {c.node for c in t.cpus} <= {n.id for n in t.nodes}
    assert all(n.distances[i] == 10 for i, n in enumerate(t.nodes))


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_minimal_tree_without_numa_or_caches(tmp_path):
    cpu = tmp_path / "devices/system/cpu"
    write(cpu / "online", "0-1\n")
    for i in (0, 1):
        write(cpu / f"cpu{i}/topology/core_id", f"{i}\n")
        write(cpu / f"cpu{i}/topology/physical_package_id", "0\n")
    t = read_sysfs(tmp_path)
    assert t.online_cpus == {0, 1} and [n.id for n in t.nodes] == [0]
    assert t.nodes[0].cpus == {0, 1} and t.caches == () and t.smt_control == "notimplemented"


def test_not_a_sys_root_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="stands for /sys"):
        read_sysfs(tmp_path)


def test_corrupt_cpulist_is_a_config_error(tmp_path):
    write(tmp_path / "devices/system/cpu/online", "0-x\n")
    with pytest.raises(ConfigError, match="online"):
        read_sysfs(tmp_path)


def test_online_cpu_without_directory_is_a_config_error(tmp_path):
    write(tmp_path / "devices/system/cpu/online", "0-3\n")
    with pytest.raises(ConfigError, match="cpu0 is online but has no directory"):
        read_sysfs(tmp_path)
