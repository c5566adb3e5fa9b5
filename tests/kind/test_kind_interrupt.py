"""kind: a run of the kind backend stopped by SIGTERM or Ctrl-C leaves no cluster, container, network or scratch dir."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from leftovers import assert_nothing_left, docker_words
from readiness import skip_unless_kind_ready

from cci_conformance.waiting import wait_for

pytestmark = [pytest.mark.kind, pytest.mark.slow]

PROJECT = Path(__file__).resolve().parents[2]
UP_TIMEOUT_S = 600  # cluster, driver image, registration on a loaded 2-CPU host
STOP_TIMEOUT_S = 180  # interrupted: the test in flight ends, the sessions close, the cluster is deleted


def _decided(report: Path) -> int:
    try:
        counts = json.loads((report / "report.json").read_text())["verdict"]["counts"]
    except (OSError, ValueError, KeyError):
        return 0  # not written yet, or being rewritten
    return counts["pass"] + counts["fail"] + counts["not-applicable"]


def _as_in_a_terminal() -> None:
    """Ctrl-C's default action for the run, as in a terminal. A shell starts a background job (`cmd &`) with SIGINT
    ignored, and an ignored disposition is inherited across exec: a self-test started that way sent its SIGINT to a
    run that could not receive it, and failed after 180 s without testing anything of the harness."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# One process, or two xdist workers with a machine (and a cluster) each (`run -n 2`, docs/kind.md).
MACHINES = {0: ["laptop-1s4c-smt2"], 2: ["laptop-1s4c-smt2", "sparse-offline"]}


@pytest.mark.parametrize(("sig", "workers"), [(signal.SIGTERM, 0), (signal.SIGINT, 0), (signal.SIGTERM, 2)],
                         ids=["sigterm", "ctrl-c", "sigterm-two-workers"])
def test_an_interrupted_kind_run_leaves_nothing(sig, workers, tmp_path):
    skip_unless_kind_ready("kind interrupt")
    prefix = f"cci-intr-{sig.name.lower()}-{workers}"
    report = tmp_path / "report"
    argv = [sys.executable, "-m", "cci_conformance", "run", "--backend", "kind", "--driver",
            str(PROJECT / "drivers_under_test" / "go-reference"), "--topology", *MACHINES[workers],
            "--report-dir", str(report), "-k", "test_restart or test_robustness"]
    if workers:
        argv += ["-n", str(workers)]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=dict(os.environ, CCI_KIND_PREFIX=prefix),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=_as_in_a_terminal)
    try:
        # stop it in the middle: once its first test is decided, with a dozen more to go (the run's report is
        # rewritten after every test; pytest.log only at the end)
        def going() -> bool:  # every worker's cluster is up, and one test is decided (or the run already ended)
            if proc.poll() is not None:
                return True
            names = docker_words("ps", "--filter", f"name={prefix}", "--format", "{{.Names}}")
            return len([n for n in names if n.endswith("control-plane")]) >= max(1, workers) and _decided(report) >= 1
        wait_for(going, UP_TIMEOUT_S, interval=1.0, what="the kind run to finish its first test")
        assert proc.poll() is None, "the run ended before it could be interrupted:\n" + \
            proc.stdout.read().decode(errors="replace")[-3000:]
        os.killpg(proc.pid, sig) if sig == signal.SIGINT else proc.send_signal(sig)
        proc.wait(timeout=STOP_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, proc.stdout.read().decode(errors="replace")[-3000:]
    assert json.loads((report / "report.json").read_text())["run"]["interrupted"] is True
    assert_nothing_left(prefix)
