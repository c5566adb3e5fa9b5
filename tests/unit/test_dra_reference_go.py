"""The reference DRA CPU driver's own Go checks (gofmt, go vet, go test ./...) inside the harness's test run."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cci_conformance.kind.image import gobuild

DRA_REFERENCE = Path(__file__).resolve().parents[2] / "drivers_under_test" / "dra-reference"
# A cold module and build cache compiles the k8s.io dependencies first: 218 s of CPU for the image build.
DEADLINE_S = 1500

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("go") is None, reason="no Go toolchain on PATH")]


def _go(*args: str) -> subprocess.CompletedProcess:
    # The kind build's module and build caches and its -trimpath (one download, one compile of the k8s.io
    # packages for both), but the repository's go.mod and go.sum are read-only here: an untidy module fails
    # instead of being rewritten.
    env = {**gobuild.go_env(), "GOFLAGS": "-mod=readonly"}
    return subprocess.run(["nice", "-n", "10", "go", *args], cwd=DRA_REFERENCE, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=DEADLINE_S)


def test_gofmt_vet_and_unit_tests_pass():
    fmt = subprocess.run(["gofmt", "-l", "."], cwd=DRA_REFERENCE, capture_output=True, text=True, timeout=60)
    assert fmt.stdout == "", f"not gofmt-formatted: {fmt.stdout}"
    vet = _go("vet", "-trimpath", "./...")
    assert vet.returncode == 0, vet.stdout + vet.stderr
    tests = _go("test", "-trimpath", "-count=1", "./...")
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-4000:]
    assert "FAIL" not in tests.stdout
