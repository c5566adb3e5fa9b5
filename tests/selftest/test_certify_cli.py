"""Self-tests of `cci-conformance run`: exit codes 0/1/2, one-line errors, progress lines and the bundle."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from example_suite import CATALOG, TOPOLOGIES, write_suite

# Only what passes on the good fake driver: every required requirement passes or does not apply.
_HEAD, *_ENTRIES = CATALOG.split("  - {")
PASSING_CATALOG = _HEAD + "".join("  - {" + e for e in _ENTRIES if "ACCT-002" not in e)


def run_cli(root, *args, driver="good", topologies=TOPOLOGIES, catalog="requirements.yaml"):
    cmd = [sys.executable, "-m", "cci_conformance", "run", "--suites", str(root), "--catalog", str(root / catalog),
           "--backend", "fake", "--driver", str(root / "drivers" / driver), "--report-dir", str(root / "out"),
           "--topology", *topologies, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=root)


@pytest.fixture
def suite(tmp_path):
    root = write_suite(tmp_path)
    (root / "passing.yaml").write_text(PASSING_CATALOG)
    return root


def test_exit_0_when_every_required_requirement_passes(suite):
    done = run_cli(suite, catalog="passing.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verdict: CERTIFIED (exit 0)" in done.stdout
    progress = [ln for ln in done.stdout.splitlines() if ln.startswith("[cci] [")]
    assert len(progress) == 10 and progress[-1].startswith("[cci] [10/10]")
    assert "FAIL     ACCT-003    (optional)" in done.stdout  # shown, but not deciding
    report = json.loads((suite / "out" / "report.json").read_text())
    assert report["verdict"]["certified"] is True
    assert (suite / "out" / "pytest.log").is_file() and (suite / "out" / "junit.xml").is_file()


def test_exit_1_when_a_requirement_fails_or_is_untested(suite):
    failing = run_cli(suite, driver="leak", catalog="passing.yaml")
    assert failing.returncode == 1
    assert "FAIL     ACCT-001" in failing.stdout and "CPUs were not freed" in failing.stdout
    untested = run_cli(suite)  # ACCT-002 has no test
    assert untested.returncode == 1
    assert "UNTESTED ACCT-002" in untested.stdout


def test_a_keyword_subset_cannot_certify(suite):
    done = run_cli(suite, "-k", "test_count", catalog="passing.yaml")
    assert done.returncode == 1
    assert "UNTESTED ACCT-001" in done.stdout


def _one_line_error(done) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_exit_2_on_a_bad_manifest(suite):
    manifest = suite / "drivers" / "good" / "driver.yaml"
    manifest.write_text(manifest.read_text() + "colour: blue\n")
    line = _one_line_error(run_cli(suite))
    assert "driver.yaml" in line and "unknown key 'colour'" in line and "fix:" in line


def test_exit_2_on_an_unknown_capability_in_the_manifest(suite):
    manifest = suite / "drivers" / "good" / "driver.yaml"
    manifest.write_text(manifest.read_text().replace('["exclusive"]', '["exclusive", "teleport"]'))
    line = _one_line_error(run_cli(suite))
    assert "unknown capability 'teleport'" in line and "capabilities" in line


def test_exit_2_on_an_unknown_topology_or_profile(suite):
    line = _one_line_error(run_cli(suite, topologies=("no-such-machine",)))
    assert "no-such-machine" in line and "fix:" in line
    line = _one_line_error(run_cli(suite, "--profile", "no-such-profile"))
    assert "no-such-profile" in line and "default" in line


def test_exit_2_on_an_unknown_backend(suite):
    cmd = [sys.executable, "-m", "cci_conformance", "run", "--suites", str(suite), "--catalog",
           str(suite / "requirements.yaml"), "--backend", "nowhere", "--driver", str(suite / "drivers" / "good"),
           "--report-dir", str(suite / "out"), "--topology", TOPOLOGIES[0]]
    line = _one_line_error(subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=suite))
    assert "unknown backend 'nowhere'" in line


def test_exit_2_on_a_suite_naming_an_unknown_requirement(suite):
    (suite / "test_bad.py").write_text('import pytest\n\n@pytest.mark.requirement("CLAIM-999")\n'
                                       "def test_bad():\n    pass\n")
    line = _one_line_error(run_cli(suite))
    assert "CLAIM-999" in line
