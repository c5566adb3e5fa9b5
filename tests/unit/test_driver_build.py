"""local.build: runs once per run before the first start, shares its result across processes, fails loudly."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cci_conformance.drivers.build import (
    BUILD_LOG,
    RUN_ID_ENV,
    BuildError,
    _process_key,
    _stamp_paths,
    build_driver,
    run_id,
)
from cci_conformance.drivers.manifest import load_manifest
from cci_conformance.drivers.process import DriverProcess
from cci_conformance.waiting import wait_for

# The build appends one line per run to a counter file, so a test can count how often it ran.
COUNTING_BUILD = "import pathlib; p = pathlib.Path('count'); p.write_text(p.read_text() + 'x' if p.exists() else 'x')"


def manifest(tmp_path, build_code: str, timeout: float | None = None):
    lines = ["name: built", "protocol: cci/v1alpha1", "capabilities: []", "local:",
             f"  build: ['{{python}}', '-c', {build_code!r}]",
             "  command: ['{python}', '-c', 'raise SystemExit(3)']"]
    if timeout:
        lines.append(f"  build_timeout_s: {timeout}")
    (tmp_path / "driver.yaml").write_text("\n".join(lines) + "\n")
    return load_manifest(tmp_path)


def gone(pid: int) -> bool:
    """No such process, or only its zombie is left."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def runs(tmp_path) -> int:
    return len((tmp_path / "count").read_text()) if (tmp_path / "count").exists() else 0


def test_build_runs_once_per_run_and_again_in_a_new_run(tmp_path, monkeypatch):
    monkeypatch.setenv(RUN_ID_ENV, "run-a-" + tmp_path.name)
    m = manifest(tmp_path, COUNTING_BUILD)
    build_driver(m, tmp_path / "logs1")
    build_driver(m, tmp_path / "logs2")
    assert runs(tmp_path) == 1
    assert "this run built the driver once" in (tmp_path / "logs2" / BUILD_LOG).read_text()
    monkeypatch.setenv(RUN_ID_ENV, "run-b-" + tmp_path.name)
    build_driver(m, tmp_path / "logs3")
    assert runs(tmp_path) == 2


def test_another_worker_of_the_same_run_reuses_the_build(tmp_path, monkeypatch):
    run = "run-shared-" + tmp_path.name
    monkeypatch.setenv(RUN_ID_ENV, run)
    m = manifest(tmp_path, COUNTING_BUILD)
    build_driver(m, tmp_path / "logs")
    code = ("import sys; from cci_conformance.drivers.manifest import load_manifest; "
            "from cci_conformance.drivers.build import build_driver; "
            "build_driver(load_manifest(sys.argv[1]), sys.argv[2])")
    env = dict(os.environ, **{RUN_ID_ENV: run})
    subprocess.run([sys.executable, "-c", code, str(tmp_path), str(tmp_path / "w2")], env=env, check=True,
                   timeout=60)
    assert runs(tmp_path) == 1
    assert (tmp_path / "w2" / BUILD_LOG).is_file()


def test_xdist_workers_share_the_run_of_their_controller(monkeypatch):
    monkeypatch.delenv(RUN_ID_ENV, raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    mine = run_id()
    assert mine == "run-" + _process_key(os.getpid()) and mine.split("-")[2].isdigit()  # pid and start time
    code = "from cci_conformance.drivers.build import run_id; print(run_id())"
    env = {k: v for k, v in os.environ.items() if k != RUN_ID_ENV}
    as_worker = subprocess.run([sys.executable, "-c", code], env=dict(env, PYTEST_XDIST_WORKER="gw0"),
                               capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    alone = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                           check=True).stdout.strip()
    assert as_worker == mine and alone != mine


def test_failed_build_names_manifest_field_and_log_and_is_not_retried(tmp_path, monkeypatch):
    monkeypatch.setenv(RUN_ID_ENV, "run-fail-" + tmp_path.name)
    m = manifest(tmp_path, COUNTING_BUILD + "; print('main.go:3: undefined: grpc'); raise SystemExit(2)")
    for attempt in ("a", "b"):
        with pytest.raises(BuildError) as err:
            build_driver(m, tmp_path / attempt)
        assert err.value.file == str(m.path) and err.value.field == "local.build"
        assert "exited with code 2" in err.value.problem and "main.go:3: undefined: grpc" in err.value.problem
        assert "main.go:3" in (tmp_path / attempt / BUILD_LOG).read_text()
    assert runs(tmp_path) == 1


def test_build_timeout_kills_the_build_and_says_which_field(tmp_path, monkeypatch):
    monkeypatch.setenv(RUN_ID_ENV, "run-slow-" + tmp_path.name)
    # The build starts a child that would outlive it; the timeout must kill the whole group.
    code = ("import subprocess, sys, pathlib; c = subprocess.Popen([sys.executable, '-c', "
            "'import time; time.sleep(60)']); pathlib.Path('child').write_text(str(c.pid)); c.wait()")
    m = manifest(tmp_path, code, timeout=1.0)
    with pytest.raises(BuildError) as err:
        build_driver(m, tmp_path / "logs")
    assert "local.build_timeout_s=1" in err.value.problem
    child = int((tmp_path / "child").read_text())
    wait_for(lambda: gone(child), 5, what=f"the build's child {child} to be killed")


def test_driver_start_builds_first_and_a_broken_build_starts_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(RUN_ID_ENV, "run-start-" + tmp_path.name)
    m = manifest(tmp_path, COUNTING_BUILD + "; raise SystemExit(1)")
    work = tmp_path / "w"
    proc = DriverProcess(m, work / "reg", work / "plug", work / "m" / "sys", work / "st", work / "logs" / "driver.log")
    with pytest.raises(BuildError, match="local.build"):
        proc.start()
    assert proc.pid is None and runs(tmp_path) == 1
    assert (work / "logs" / BUILD_LOG).is_file()


def test_a_build_removes_the_stamps_of_driver_folders_that_are_gone(tmp_path, monkeypatch):
    """A folder made for one test leaves its stamp behind; the next build clears it, and keeps live ones."""
    monkeypatch.setenv(RUN_ID_ENV, "run-prune-" + tmp_path.name)
    (tmp_path / "gone").mkdir()
    (tmp_path / "kept").mkdir()
    gone_manifest = manifest(tmp_path / "gone", COUNTING_BUILD)
    kept_manifest = manifest(tmp_path / "kept", COUNTING_BUILD)
    build_driver(gone_manifest, tmp_path / "logs1")
    build_driver(kept_manifest, tmp_path / "logs2")
    gone_lock, gone_stamp = _stamp_paths(gone_manifest)
    assert gone_stamp.exists() and gone_lock.exists()
    (tmp_path / "gone" / "driver.yaml").unlink()
    other = tmp_path / "other"
    other.mkdir()
    build_driver(manifest(other, COUNTING_BUILD), tmp_path / "logs3")
    assert not gone_stamp.exists() and not gone_lock.exists()
    assert all(p.exists() for p in _stamp_paths(kept_manifest))
