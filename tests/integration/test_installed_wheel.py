"""A built wheel installed into a fresh venv, outside the source tree, certifies both reference drivers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from cci_conformance.drivers.manifest import load_manifest
from cci_conformance.paths import PACKAGE_DIR

pytestmark = [pytest.mark.slow, pytest.mark.integration]

SOURCE = PACKAGE_DIR.parent
# What a checkout may hold that is not source: never copied into the build.
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", ".tox", "build", "dist", "*.egg-info", "__pycache__",
                                    "cci-reports", "reports-out", ".pytest_cache", ".ruff_cache", ".hypothesis")
BUILD_DEADLINE_S = 300
INSTALL_DEADLINE_S = 600
RUN_DEADLINE_S = 900

# A manifest whose "driver" only says which cci_conformance it imports and what PYTHONPATH it got.
PROBE = """\
name: probe
protocol: cci/v1alpha1
capabilities: []
local:
  command: ["{python}", "-c", "import os, cci_conformance; print('IMPORTED', cci_conformance.__file__,
             'PYTHONPATH=' + os.environ.get('PYTHONPATH', ''))"]
"""
PROBE_START = """\
import sys
from pathlib import Path
from cci_conformance.drivers.manifest import load_manifest
from cci_conformance.drivers.process import DriverProcess
from cci_conformance.waiting import wait_for
w = Path(sys.argv[2])
p = DriverProcess(load_manifest(sys.argv[1]), w / "reg", w / "plug", w / "m" / "sys", w / "st", w / "driver.log")
p.start()
wait_for(lambda: not p.alive, 30, what="the probe to exit")
p.close()
print(p.log_path.read_text())
"""


def clean_env(venv: Path) -> dict[str, str]:
    """This machine's environment (pip's index settings included) without anything pointing at the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def timed(cmd: list, cwd: Path, env: dict | None, timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return done, time.monotonic() - started


@dataclass(frozen=True)
class Installed:
    venv: Path
    work: Path  # an empty directory, outside the source tree: where a vendor's CI would run
    env: dict
    wheel: Path


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    """The wheel built from a copy of the source, installed into a fresh venv (built once per module)."""
    if shutil.which("pip", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("no pip beside this interpreter to build the wheel with")
    root = tmp_path_factory.mktemp("wheel")
    tree, dist, work = root / "src", root / "dist", root / "empty"
    shutil.copytree(SOURCE, tree, ignore=NOT_SOURCE, symlinks=True)
    work.mkdir()
    # The build as a vendor's CI runs it: pip fetches the setuptools pyproject.toml asks for (PEP 517
    # isolation), so the result does not depend on this environment's setuptools.
    built, build_s = timed([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(tree)],
                           root, None, BUILD_DEADLINE_S)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("cci_conformance-*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = clean_env(venv)
    done, install_s = timed([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], work,
                            env, INSTALL_DEADLINE_S)
    assert done.returncode == 0, done.stdout + done.stderr
    shutil.rmtree(tree)  # nothing of the checkout is left to lean on
    print(f"\ninstalled wheel: size {wheel.stat().st_size / 1024:.0f} KiB, build {build_s:.1f} s, "
          f"install {install_s:.1f} s")
    return Installed(venv, work, env, wheel)


def failures(report: Path) -> str:
    """Each requirement that did not pass, with its tests' reasons, from report.json (the run's stdout tail is
    mostly figures: a failure in CI must say which test failed and why)."""
    try:
        data = json.loads((report / "report.json").read_text())
    except (OSError, ValueError) as exc:
        return f"(no report.json: {exc})\n"
    lines = [f"{r['id']}: {r['status']}: {t['nodeid']}: {t['outcome']}: {t.get('reason', '')}"
             for r in data.get("requirements", []) if r["status"] != "pass"
             for t in r.get("tests", []) if t["outcome"] in ("failed", "error", "missing")]
    return "\n".join(["failing:", *lines, *map(str, data.get("errors", [])), ""])


def certify(inst: Installed, report: Path, *options: str) -> dict:
    """``cci-conformance run`` of the installed harness from the empty directory; the report it wrote."""
    ran, run_s = timed([str(inst.venv / "bin" / "cci-conformance"), "run", "--report-dir", str(report), *options],
                       inst.work, inst.env, RUN_DEADLINE_S)
    assert ran.returncode == 0, failures(report) + ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "verdict: CERTIFIED (exit 0)" in ran.stdout
    print(f"\ncertification run {' '.join(options) or '(reference)'}: {run_s:.1f} s")
    result = json.loads((report / "report.json").read_text())
    assert result["verdict"]["exit_code"] == 0
    return result


def test_wheel_installs_outside_the_tree_and_certifies_the_reference_driver(installed, tmp_path):
    venv, work, env = installed.venv, installed.work, installed.env
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import cci_conformance.paths as p; "
                            "print(p.INSTALLED, p.SUITES_DIR, p.REFERENCE_DRIVER_DIR)"],
                           cwd=work, env=env, capture_output=True, text=True, timeout=60, check=True)
    installed_flag, suites, reference = where.stdout.split()
    assert installed_flag == "True"
    assert Path(suites).is_relative_to(venv) and Path(reference).is_relative_to(venv)

    # A driver started by the installed harness imports the installed package, with no PYTHONPATH added.
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "driver.yaml").write_text(PROBE)
    probe = subprocess.run([str(venv / "bin" / "python"), "-c", PROBE_START, str(tmp_path / "probe"),
                            str(tmp_path / "probe-run")], cwd=work, env=env, capture_output=True, text=True,
                           timeout=60)
    assert probe.returncode == 0, probe.stdout + probe.stderr
    imported = next(line for line in probe.stdout.splitlines() if line.startswith("IMPORTED"))
    module_file, pythonpath = imported.split()[1], imported.split("PYTHONPATH=")[1]
    assert Path(module_file).is_relative_to(venv) and pythonpath == ""

    # What this proves is the package: every suite module, topology file and profile it ships runs from the
    # install. The reference driver's verdicts on every machine, ACCT-010's depth included, are
    # tests/selftest/test_reference_certifies.py's, so one machine and ten examples do here (the Go driver's
    # run below keeps the default machines: it is that driver's only certification)
    report = certify(installed, work / "report", "--topology", "server-2s8c-smt2-intel", "--stateful-examples", "10")
    assert Path(report["run"]["driver"]["manifest"]).is_relative_to(venv)
    assert report["run"]["stateful_examples"] == 10


def test_go_driver_certifies_from_the_installed_wheel(installed):
    """Issue 13: a Go driver, built against the stubs the wheel ships, is CERTIFIED by the installed harness."""
    if shutil.which("go", path=installed.env["PATH"]) is None:
        pytest.skip("no go on PATH to build the Go reference driver with")
    # The driver's source as a vendor would hold it: its own folder, no checkout beside it. Its go.mod's
    # replace points at the API module the installed harness ships (docs/authors.md, "Go").
    driver = installed.work / "go-driver"
    shutil.copytree(SOURCE / "drivers_under_test" / "go-reference", driver,
                    ignore=shutil.ignore_patterns("bin", "go-reference"))
    api = subprocess.run([str(installed.venv / "bin" / "python"), "-c",
                          "import cci_conformance.paths as p; print(p.GO_API_DIR)"],
                         cwd=installed.work, env=installed.env, capture_output=True, text=True, timeout=60,
                         check=True).stdout.strip()
    assert Path(api).is_relative_to(installed.venv) and (Path(api) / "go.mod").is_file()
    shutil.copytree(api, driver / "cci-api")
    subprocess.run(["go", "mod", "edit", "-replace", "github.com/cci-conformance/cci-conformance/api=./cci-api"],
                   cwd=driver, env=installed.env, check=True, timeout=60)
    report = certify(installed, installed.work / "go-report", "--driver", str(driver))
    assert report["run"]["driver"]["name"] == "go-reference"
    # The Go reference's only certification in the tests (tests/integration/test_go_reference.py compares its
    # replies with the Python one's): every requirement of a declared capability (or of none) ran and passed.
    declared = set(report["run"]["driver"]["capabilities"])
    assert declared == set(load_manifest(driver).capabilities)
    assert {r["status"] for r in report["requirements"]} <= {"pass", "not-applicable"}
    waived = [r["id"] for r in report["requirements"] if r["status"] == "not-applicable"
              and (r.get("capability") is None or r.get("capability") in declared)]
    assert not waived, f"requirements waived although the driver declares their capability: {waived}"
