"""A driver whose local.build fails stops the run in seconds: one message naming manifest and field, all untested."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cci_conformance.drivers.scaffold import init_driver

pytestmark = pytest.mark.integration
FAILING_BUILD = '  build: ["{python}", "-c", "print(\'main.go:7: undefined: Admit\'); raise SystemExit(2)"]\n'


def test_failed_build_stops_the_run_with_every_requirement_untested(tmp_path):
    folder = tmp_path / "broken"
    init_driver(folder, "python")
    manifest = folder / "driver.yaml"
    manifest.write_text(manifest.read_text().replace("local:\n", "local:\n" + FAILING_BUILD))
    done = subprocess.run([sys.executable, "-m", "cci_conformance", "run", "--driver", str(folder), "--topology",
                           "server-2s8c-smt2-intel", "--report-dir", str(tmp_path / "report")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    stopped = next(line for line in done.stdout.splitlines() if line.startswith("[cci] STOPPED"))
    assert f"{manifest}: local.build: `{{python}} -c" in stopped and "exited with code 2" in stopped
    assert "main.go:7: undefined: Admit" in stopped
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    statuses = {r["id"]: r["status"] for r in report["requirements"]}
    assert statuses.pop("REG-001") == "fail"  # the probe's requirement: the driver never registered
    assert set(statuses.values()) == {"untested"}
    (kept,) = (tmp_path / "report" / "sessions").glob("*-failed-start/build.log")
    assert "main.go:7: undefined: Admit" in kept.read_text()
