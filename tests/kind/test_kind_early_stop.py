"""kind: a driver that never registers stops a two-worker run in minutes, with one message and nothing left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from leftovers import assert_nothing_left
from readiness import skip_unless_kind_ready

pytestmark = [pytest.mark.kind, pytest.mark.slow]

PROJECT = Path(__file__).resolve().parents[2]
PREFIX = "cci-silent"
MACHINES = ["laptop-1s4c-smt2", "sparse-offline"]
# two clusters at once, the driver image, then the kubelet's registration wait (120 s) on a 2-CPU host
RUN_TIMEOUT_S = 1200


# A process that starts fine and never creates its registration socket (a wrong path, a hung init); the harness
# builds its image, as for any Python driver.
SILENT_DRIVER = """\
name: silent
protocol: cci/v1alpha1
capabilities: [exclusive, shared]
local:
  command: ["{python}", "-c", "import time; time.sleep(3600)"]
startup_timeout_s: 5
"""


def _silent_driver(folder: Path) -> Path:
    folder.mkdir()
    (folder / "driver.yaml").write_text(SILENT_DRIVER)
    return folder


def test_a_driver_that_never_registers_stops_a_two_worker_kind_run(tmp_path):
    skip_unless_kind_ready("kind early stop")
    report = tmp_path / "report"
    argv = [sys.executable, "-m", "cci_conformance", "run", "--backend", "kind", "--driver",
            str(_silent_driver(tmp_path / "silent")), "--topology", *MACHINES, "--report-dir", str(report),
            "-n", "2"]
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=tmp_path, env=dict(os.environ, CCI_KIND_PREFIX=PREFIX), capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S)
    seconds = time.monotonic() - started
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    print(f"a never-registering driver stopped the two-worker kind run in {seconds:.0f} s")
    result = json.loads((report / "report.json").read_text())
    statuses = {r["id"]: r["status"] for r in result["requirements"] if r["kind"] != "node-precondition"}
    assert statuses.pop("REG-001") == "fail", out[-3000:]
    assert set(statuses.values()) == {"untested"}
    run = result["run"]
    assert "did not register with the kubelet of machine" in run["stopped_early"] and run["interrupted"] is False
    assert [e["kind"] for e in result["errors"]] == ["driver-start"]
    tried = [t for r in result["requirements"] for t in r["tests"]
             if t["outcome"] != "missing" and not t["nodeid"].startswith("cci-conformance::")]  # not the stop's
    # each worker stops after the test that met the failure; nothing else of the ~200 tests ran
    assert len(tried) <= 2 and all("the run stopped early" in t["reason"] for t in tried), tried
    assert_nothing_left(PREFIX)
