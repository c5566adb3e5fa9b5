"""SIGTERM ends a run like Ctrl-C: report marked interrupted, and no node, driver or scratch directory left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from cci_conformance.paths import PROJECT_ROOT
from cci_conformance.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPOLOGY = "laptop-1s4c-smt2"
SLOW_TEST = "test_invariants_hold_under_random_interleavings"  # ACCT-010: about a minute on TOPOLOGY
MARKER = "CCI_SIGTERM_TEST_RUN"  # an environment variable every process of the run inherits
STARTUP_DEADLINE_S = 120.0  # pytest start, the startup probe's session, then the test's own fresh node
EXIT_DEADLINE_S = 45.0  # an embedded run ends in seconds (the CLI would wait up to INTERRUPT_GRACE_S for a kind run)


def run_processes(marker: str) -> dict[int, str]:
    """pid -> where the stdout of every live process whose environment carries the marker goes (zombies left
    out). A node writes to ``<workdir>/logs/node.log``, whether started as an interpreter of its own or forked
    from the node fork server (node/forkserver.py, whose forks keep its command line)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if f"{MARKER}={marker}".encode() not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            found[int(entry.name)] = os.readlink(entry / "fd" / "1")
        except OSError:  # gone meanwhile, or not ours
            continue
    return found


class RunWatch:
    """The scratch directories of the run's node sessions (each node logs to its workdir's logs/node.log)."""

    def __init__(self, marker: str):
        self.marker = marker
        self.workdirs: set[Path] = set()
        self.machines: set[Path] = set()  # the rendered-topology cache the workdirs link to

    def live_sessions(self) -> list[Path]:
        """Workdirs of nodes that run now and have a driver registration socket."""
        up = []
        for stdout in run_processes(self.marker).values():
            if not stdout.endswith("/logs/node.log"):
                continue
            workdir = Path(stdout).parent.parent
            self.workdirs.add(workdir)
            if (workdir / "machine").is_symlink():
                self.machines.add(Path(os.readlink(workdir / "machine")))
            if any((workdir / "kubelet" / "plugins_registry").glob("*-reg.sock")):
                up.append(workdir)
        return up


def start(argv: list[str], cwd: Path, log: Path) -> tuple[subprocess.Popen, RunWatch]:
    """Start the run in a process group of its own, its output in ``log`` (a pipe nobody reads could block it)."""
    marker = uuid.uuid4().hex
    env = dict(os.environ, **{MARKER: marker})
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    return proc, RunWatch(marker)


def interrupt_mid_test(proc: subprocess.Popen, watch: RunWatch) -> float:
    """Wait until the slow test's own node is up (the probe's shared one plus the test's fresh one), then
    SIGTERM the run's first process only, as `kill PID` would; returns the seconds until it exited."""
    wait_for(lambda: proc.poll() is not None or len(watch.live_sessions()) >= 2, STARTUP_DEADLINE_S,
             interval=0.1, what="the slow test's node session")
    assert proc.poll() is None, f"the run ended before the slow test started (exit {proc.returncode})"
    watch.live_sessions()  # every workdir and machine cache of the run is known before the signal
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=EXIT_DEADLINE_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"the run did not end within {EXIT_DEADLINE_S:g} s of SIGTERM")
    return time.monotonic() - sent


def assert_nothing_left(watch: RunWatch, output: str) -> None:
    try:  # an exited process is reaped by init, a moment after its parent ended
        wait_for(lambda: not run_processes(watch.marker), 10.0, interval=0.1, what="the run's processes to go")
    except TimeoutError:
        pass
    assert run_processes(watch.marker) == {}, output[-3000:]
    assert watch.workdirs and watch.machines
    assert [p for p in watch.workdirs | watch.machines if p.exists()] == [], output[-3000:]


def interrupted_report(report_dir: Path) -> dict:
    run = json.loads((report_dir / "report.json").read_text())["run"]
    assert run["interrupted"] is True and run["complete"] is False, run
    return run


def test_sigterm_to_cci_conformance_run_ends_it_and_leaves_nothing(tmp_path):
    report_dir = tmp_path / "report"
    log = tmp_path / "run.log"
    proc, watch = start([sys.executable, "-m", "cci_conformance", "run", "--topology", TOPOLOGY, "-k", SLOW_TEST,
                         "--report-dir", str(report_dir)], tmp_path, log)
    seconds = interrupt_mid_test(proc, watch)
    output = log.read_text(errors="replace")
    print(f"cci-conformance run ended {seconds:.1f} s after SIGTERM")
    assert proc.returncode == 130, output[-3000:]  # interrupted (docs/certification.md, exit codes)
    assert "interrupted; the report holds the partial results" in output
    interrupted_report(report_dir)
    assert_nothing_left(watch, output)


def test_sigterm_to_pytest_suites_ends_it_and_leaves_nothing(tmp_path):
    report_dir = tmp_path / "report"
    argv = [sys.executable, "-m", "pytest", str(PROJECT_ROOT / "suites"), "-q", "-p", "no:cacheprovider",
            "--cci-topology", TOPOLOGY, "-k", SLOW_TEST, "--cci-report-dir", str(report_dir)]
    proc, watch = start(argv, PROJECT_ROOT, tmp_path / "pytest.log")
    seconds = interrupt_mid_test(proc, watch)
    output = (tmp_path / "pytest.log").read_text(errors="replace")
    print(f"pytest suites/ ended {seconds:.1f} s after SIGTERM")
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, output[-3000:]
    # Either path of interrupts.py: the KeyboardInterrupt ends the run at once, or code under test swallowed
    # it (turned it into another error) and the run stops at the test's end (seen in CI)
    assert "KeyboardInterrupt" in output or "interrupted by SIGTERM" in output, output[-3000:]
    run = interrupted_report(report_dir)
    assert run["exit_status"] == pytest.ExitCode.INTERRUPTED
    assert_nothing_left(watch, output)
