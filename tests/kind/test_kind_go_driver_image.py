"""kind: a non-Python driver the way a vendor brings it: an image archive in kind.image with its kind.command.

A copy of the Go reference (and the ../../api its go.mod replaces) gets its archive from `cci-conformance driver
image`, its manifest is rewritten from kind.source to kind.image + kind.command (the vendor path: the harness only
loads the archive), and `cci-conformance run --backend kind` certifies it on one machine (and LAT-004's growth
machines)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from leftovers import assert_nothing_left
from readiness import skip_unless_kind_ready, skip_unless_opted_in

from cci_conformance.kind.cci.driver_image import archive_reference, file_digest

pytestmark = [pytest.mark.kind, pytest.mark.slow]

PROJECT = Path(__file__).resolve().parents[2]
GO_REFERENCE = PROJECT / "drivers_under_test" / "go-reference"
# Not laptop-1s4c-smt2: alone it cannot certify (one NUMA node: CLAIM-009..014 stay untested, NOT CERTIFIED, exit 1,
# also on the embedded backend); server-2s8c-smt2-intel alone certifies the Go reference (embedded: 45 s).
TOPOLOGY = "server-2s8c-smt2-intel"
PREFIX = "cci-vendor-go"
BUILD_TIMEOUT_S = 1800  # a cold Go build of the driver (module downloads, grpc) on a loaded 2-core host
# One machine's certification on kind: one cluster, the archive loaded, every module, the cluster deleted. The
# reference took 27-33 min for two machines with -n 2 (docs/kind.md), so about that for one machine in one process.
RUN_TIMEOUT_S = 3600
OPT_IN = "CCI_KIND_VENDOR_GO"  # "1": run it (half an hour on 2 cores; CI's kind job certifies the reference already)


@pytest.fixture(scope="module", autouse=True)
def kind_ready():
    skip_unless_opted_in(OPT_IN, "vendor Go driver on kind", "a certification run of about half an hour on 2 cores")
    skip_unless_kind_ready("vendor Go driver on kind")
    if shutil.which("go") is None:
        pytest.skip("vendor Go driver on kind: go is not on PATH (the archive is built from the Go reference)")


def _copy_go_reference(root: Path) -> Path:
    """The Go reference and the API module its go.mod replaces (../../api), at the same relative places."""
    copy = root / "drivers_under_test" / "go-reference"
    shutil.copytree(GO_REFERENCE, copy, ignore=shutil.ignore_patterns("bin", "*.oci.tar", "*.log"))
    shutil.copytree(PROJECT / "api", root / "api", ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_a_go_driver_archive_in_kind_image_certifies_on_kind(tmp_path):
    copy = _copy_go_reference(tmp_path / "vendor")
    made = subprocess.run([sys.executable, "-m", "cci_conformance", "driver", "image", str(copy)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    assert made.returncode == 0, made.stdout + made.stderr
    archive = copy / "go-reference.oci.tar"
    digest = file_digest(archive)
    assert f"archive: {archive}" in made.stdout and digest.removeprefix("sha256:") in made.stdout
    section = yaml.safe_load(made.stdout[made.stdout.index("kind:\n"):])["kind"]
    manifest = yaml.safe_load((copy / "driver.yaml").read_text())
    assert section == {"image": "go-reference.oci.tar", "command": manifest["kind"]["command"]}
    manifest["kind"] = section  # the vendor path: no kind.source, the harness only loads the archive
    (copy / "driver.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))

    report = tmp_path / "report"
    argv = [sys.executable, "-m", "cci_conformance", "run", "--backend", "kind", "--driver", str(copy),
            "--topology", TOPOLOGY, "--report-dir", str(report)]
    proc = subprocess.run(argv, cwd=tmp_path, env=dict(os.environ, CCI_KIND_PREFIX=PREFIX), capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    assert "verdict: CERTIFIED (exit 0)" in proc.stdout, out[-5000:]
    result = json.loads((report / "report.json").read_text())
    assert result["verdict"]["state"] == "certified"
    # What ran is the archive: its reference and sha256 are the driver image's in the report.
    assert result["run"]["backend_facts"]["driver_image"] == {
        "reference": archive_reference(archive, str(archive)), "origin": "vendor archive", "archive_sha256": digest}
    assert result["run"]["driver"]["name"] == "go-reference"
    assert_nothing_left(PREFIX)
