"""The node's cpuset recorder (an OCI runtime wrapper in Go): records requested cpusets, folds them onto real CPUs."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from cci_conformance.cpuset import parse_cpulist
from cci_conformance.kind.image import gobuild

ASSETS = Path(__file__).resolve().parents[2] / "cci_conformance" / "kind" / "image" / "assets"
CPUSET = Path("/sys/fs/cgroup/cpuset/cpuset.cpus")

pytestmark = pytest.mark.skipif(shutil.which("go") is None or not CPUSET.exists(),
                                reason="needs Go and a cgroup v1 cpuset hierarchy")


@pytest.fixture(scope="module")
def recorder():
    return gobuild.build_local("cpuset-recorder", ASSETS / "cpuset-recorder.go")


def _run(recorder: Path, work: Path, *args: str, stdin: bytes | None = None):
    fake_runc = work / "runc"
    # The fake runtime saves what it was given, so the test sees what runc would have seen.
    fake_runc.write_text(f"#!/bin/sh\necho \"$@\" > {work}/argv\ncat > {work}/stdin\n")
    fake_runc.chmod(0o755)
    env = {"CPUSET_RECORDER_RUNTIME": str(fake_runc), "CPUSET_RECORDER_LOG": str(work / "log.jsonl")}
    subprocess.run([recorder, *args], input=stdin or b"", env=env, check=True, timeout=30)


def test_create_records_request_and_folds_it_onto_allowed_cpus(recorder):
    work = Path(tempfile.mkdtemp(prefix="cci-rec-", dir="/tmp"))
    allowed = sorted(parse_cpulist(CPUSET.read_text()))
    huge = max(allowed) + 100  # surely not a real CPU
    config = {"linux": {"cgroupsPath": "kubepods.slice:cri-containerd:abc",
                        "resources": {"cpu": {"cpus": f"{huge},{huge + 1}"}}},
              "annotations": {"io.kubernetes.cri.container-type": "container",
                              "io.kubernetes.cri.container-name": "app"}}
    (work / "config.json").write_text(json.dumps(config))
    _run(recorder, work, "--root", "/run/x", "--systemd-cgroup", "create", "--bundle", str(work), "cid1")
    applied = json.loads((work / "config.json").read_text())["linux"]["resources"]["cpu"]["cpus"]
    assert parse_cpulist(applied) <= set(allowed)
    assert parse_cpulist(applied) == {allowed[huge % len(allowed)], allowed[(huge + 1) % len(allowed)]}
    (record,) = [json.loads(line) for line in (work / "log.jsonl").read_text().splitlines()]
    assert record["op"] == "create" and record["id"] == "cid1" and record["cpus"] == f"{huge},{huge + 1}"
    assert record["container-name"] == "app" and record["applied"] == applied
    assert (work / "argv").read_text().split()[-1] == "cid1"
    shutil.rmtree(work)


@pytest.mark.parametrize("option", [("--resources", "-"), ("--resources=-",)], ids=["separate", "equals"])
def test_update_from_stdin_is_rewritten_and_recorded(recorder, option):
    # containerd's shim (go-runc) writes "update --resources=- <id>": both forms must be recorded.
    work = Path(tempfile.mkdtemp(prefix="cci-rec-", dir="/tmp"))
    allowed = sorted(parse_cpulist(CPUSET.read_text()))
    request = json.dumps({"cpu": {"cpus": str(allowed[0])}}).encode()
    _run(recorder, work, "update", *option, "cid2", stdin=request)
    # A request inside the node's own cpuset is passed on unchanged.
    assert json.loads((work / "stdin").read_text())["cpu"]["cpus"] == str(allowed[0])
    (record,) = [json.loads(line) for line in (work / "log.jsonl").read_text().splitlines()]
    assert record["op"] == "update" and record["id"] == "cid2" and record["applied"] == str(allowed[0])
    shutil.rmtree(work)


def _has_sys_resource() -> bool:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> 24 & 1)
    return True


def test_oom_score_adj_is_raised_only_without_cap_sys_resource(recorder):
    work = Path(tempfile.mkdtemp(prefix="cci-rec-", dir="/tmp"))
    own = int(Path("/proc/self/oom_score_adj").read_text())
    allowed = sorted(parse_cpulist(CPUSET.read_text()))
    huge = max(allowed) + 100
    config = {"process": {"oomScoreAdj": own - 1}, "linux": {"resources": {"cpu": {"cpus": str(huge)}}}}
    (work / "config.json").write_text(json.dumps(config))
    _run(recorder, work, "create", "--bundle", str(work), "cid3")
    written = json.loads((work / "config.json").read_text())
    assert written["process"]["oomScoreAdj"] == (own - 1 if _has_sys_resource() else own)
    # Both rewrites apply together (a folded cpuset must not skip the clamp).
    assert written["linux"]["resources"]["cpu"]["cpus"] == str(allowed[huge % len(allowed)])
    shutil.rmtree(work)


def test_update_beyond_the_node_is_folded_in_the_equals_form(recorder):
    # An NRI plugin's update of another container reaches runc as "update --resources=- <id>";
    # unfolded, a faked CPU id the host lacks fails the update (ERANGE), as seen on kind.
    work = Path(tempfile.mkdtemp(prefix="cci-rec-", dir="/tmp"))
    allowed = sorted(parse_cpulist(CPUSET.read_text()))
    huge = max(allowed) + 64
    _run(recorder, work, "update", "--resources=-", "cid3", stdin=json.dumps({"cpu": {"cpus": str(huge)}}).encode())
    assert json.loads((work / "stdin").read_text())["cpu"]["cpus"] == str(allowed[huge % len(allowed)])
    (record,) = [json.loads(line) for line in (work / "log.jsonl").read_text().splitlines()]
    assert record["op"] == "update" and record["cpus"] == str(huge)
    shutil.rmtree(work)


def test_a_start_is_recorded_only_once_runc_started_the_container(recorder):
    # The session settles a pod from these lines (the API server reports Running a PLEG relist later): a start
    # runc refused must leave no line, and its exit status must reach the shim unchanged.
    work = Path(tempfile.mkdtemp(prefix="cci-rec-", dir="/tmp"))
    _run(recorder, work, "--root", "/run/x", "start", "cid4")
    assert (work / "argv").read_text().split() == ["--root", "/run/x", "start", "cid4"]
    (record,) = [json.loads(line) for line in (work / "log.jsonl").read_text().splitlines()]
    assert record["op"] == "start" and record["id"] == "cid4"
    failing = work / "failing-runc"
    failing.write_text("#!/bin/sh\nexit 3\n")
    failing.chmod(0o755)
    env = {"CPUSET_RECORDER_RUNTIME": str(failing), "CPUSET_RECORDER_LOG": str(work / "failed.jsonl")}
    done = subprocess.run([recorder, "start", "cid5"], env=env, timeout=30)
    assert done.returncode == 3 and not (work / "failed.jsonl").exists()
    shutil.rmtree(work)
