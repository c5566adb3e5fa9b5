"""The driver's own view of a faked machine, laid out as its DaemonSet mounts it, against the topology."""

from __future__ import annotations

import os
import shutil

import pytest

from cci_conformance.errors import ConfigError
from cci_conformance.kind import dracpu, dracpu_view
from cci_conformance.kind.dracpu_manifests import DriverDeployment
from cci_conformance.topology import library, render


def _plan(**kwargs) -> DriverDeployment:
    return DriverDeployment(image="localhost/cci-conformance/dra-driver-cpu:v0.2.0", node_name="w", **kwargs)


def _report_from(topology) -> dict:
    """The report a driver that reads sysfs correctly would give (the layout of dracpu-gatherinfo)."""
    l3 = {cpu: c.id for c in topology.caches if c.level == 3 for cpu in c.cpus}
    core_of = {cpu: core for core in topology.cores for cpu in core}
    cpus = [{"cpuID": c.id, "socketID": c.package, "coreID": c.core, "numaNodeID": c.node,
             "coreType": {"": "standard", "p": "p-core", "e": "e-core"}[c.core_type],
             "uncoreCacheID": l3.get(c.id, -1),
             "sibling": min((s for s in core_of[c.id] if s != c.id), default=-1)} for c in topology.cpus]
    summary = {"numCPUs": len(cpus), "numSockets": len({c.package for c in topology.cpus}),
               "numNUMANodes": len({c.node for c in topology.cpus}), "numCores": len(topology.cores),
               "smtEnabled": topology.smt_control == "on"}
    return {"cpuDetails": {"cpus": cpus, "topology": summary}}


def test_host_root_shows_exactly_the_daemonsets_sysfs_mounts(tmp_path):
    topology = library.load("hybrid-8p8e")
    machine = render.render(topology, tmp_path / "machine")
    root = dracpu_view.host_root(_plan(), machine, tmp_path)
    assert (root / "sys/devices/system/cpu/online").read_text().strip()
    assert (root / "sys/devices/system/node").is_dir()
    # Not mounted without hybrid=True, so the driver cannot see the E-core list.
    assert not (root / "sys/devices/cpu_atom").exists()
    assert (root / "proc/1/cmdline").read_bytes().split(b"\0")[:3] == [b"/dracpu", b"--v=4",
                                                                      b"--cpu-device-mode=individual"]
    hybrid_root = dracpu_view.host_root(_plan(hybrid=True), machine, tmp_path / "h")
    assert (hybrid_root / "sys/devices/cpu_atom/cpus").is_file()


def test_a_mount_the_machine_lacks_is_refused(tmp_path):
    machine = render.render(library.load("laptop-1s4c-smt2"), tmp_path / "machine")
    with pytest.raises(ConfigError, match="cpu_atom"):
        dracpu_view.host_root(_plan(hybrid=True), machine, tmp_path)


def test_a_faithful_report_has_no_mismatch_and_each_distortion_is_named():
    topology = library.load("server-2s8c-smt2-intel")
    assert dracpu_view.mismatches(topology, _report_from(topology)) == []
    report = _report_from(topology)
    report["cpuDetails"]["cpus"][3]["socketID"] = 7
    report["cpuDetails"]["cpus"][5]["sibling"] = -1
    del report["cpuDetails"]["cpus"][9]
    report["cpuDetails"]["topology"]["smtEnabled"] = False
    problems = dracpu_view.mismatches(topology, report)
    assert any(p.startswith("cpu3: socketID is 7") for p in problems)
    assert any(p.startswith("cpu5: sibling -1") for p in problems)
    assert any(p.startswith("CPUs:") and "missing [9]" in p for p in problems)
    assert any(p.startswith("topology: smtEnabled") for p in problems)


def _binary():
    if shutil.which("go") is None:
        pytest.skip("go is not installed: the driver is built from its Go module")
    return dracpu.build_image("v0.2.0").binary


@pytest.mark.slow
@pytest.mark.parametrize("name", ["server-2s8c-smt2-intel", "server-2s-snc4", "hybrid-8p8e", "sparse-offline"])
def test_v0_2_0_reads_the_faked_machine_as_sysfs_describes_it(name, tmp_path):
    topology = library.load(name)
    machine = render.render(topology, tmp_path / "machine")
    plan = _plan(hybrid=bool(topology.core_types))
    report = dracpu_view.driver_report(_binary(), dracpu_view.host_root(plan, machine, tmp_path))
    assert dracpu_view.mismatches(topology, report) == []


@pytest.mark.slow
def test_v0_2_0_knows_no_thread_sibling_on_a_four_thread_core(tmp_path):
    """Found here before any kind run: v0.2.0 pairs threads only on cores with exactly two (docs/dra-cpu.md)."""
    topology = library.load("smt4-2s")
    machine = render.render(topology, tmp_path / "machine")
    report = dracpu_view.driver_report(_binary(), dracpu_view.host_root(_plan(), machine, tmp_path))
    problems = dracpu_view.mismatches(topology, report)
    assert problems and all(": sibling -1, sysfs thread siblings" in p for p in problems), problems[:5]
    assert len(problems) == len(topology.cpus)
    assert os.path.exists(machine / "sys/devices/system/cpu/cpu0/topology/thread_siblings_list")
