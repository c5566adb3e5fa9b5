"""A driver that never registers stops `cci-conformance run` in seconds, with one message, the rest untested."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from cci_conformance.paths import PROJECT_ROOT

pytestmark = [pytest.mark.integration]

STARTUP_TIMEOUT_S = 2
# A process that starts fine and never creates its registration socket (a wrong path, a hung init).
SILENT_DRIVER = f"""\
name: silent
protocol: cci/v1alpha1
capabilities: [exclusive, shared]
local:
  command: ["{{python}}", "-c", "import time; time.sleep(120)"]
startup_timeout_s: {STARTUP_TIMEOUT_S}
"""


def test_a_driver_that_never_registers_stops_the_run_in_seconds(tmp_path):
    (tmp_path / "silent").mkdir()
    (tmp_path / "silent" / "driver.yaml").write_text(SILENT_DRIVER)
    out = tmp_path / "out"
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "cci_conformance", "run", "--driver", str(tmp_path / "silent"),
                           "--report-dir", str(out)], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    seconds = time.monotonic() - started
    # before the probe: every test waited out the startup timeout (about 12 minutes for the default run)
    assert seconds < 60, f"took {seconds:.0f} s"
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    text = proc.stdout + proc.stderr
    mentions = [line for line in text.splitlines() if "did not come up" in line or "is not registered" in line]
    assert 1 <= len(mentions) <= 2, mentions  # the live line and the summary's, not one per test
    assert str(tmp_path / "silent" / "driver.yaml") in mentions[0] and f"startup_timeout_s {STARTUP_TIMEOUT_S}" \
        in mentions[0]
    report = json.loads((out / "report.json").read_text())
    statuses = {r["id"]: r["status"] for r in report["requirements"]}
    assert statuses.pop("REG-001") == "fail"  # registering within startup_timeout_s is exactly what it failed
    assert set(statuses.values()) == {"untested"}
    assert report["verdict"]["certified"] is False and report["run"]["stopped_early"]
    assert list(out.glob("sessions/*-failed-start/driver.log")), "the silent driver's log is kept"
