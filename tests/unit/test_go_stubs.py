"""The checked-in Go stubs of the CCI API are exactly what api/generate.sh regenerates from the .proto."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
API = REPO / "api"
# generate.sh looks for the pinned plugins in this GOBIN first (.ci/run installs them there).
GOBIN = Path(os.environ.get("GOBIN") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
             / "cci-conformance" / "gobin")
# The protoc version comes from the OS package, not from a pin; it only appears in this header line.
PROTOC_LINE = re.compile(rb"^// \tprotoc +v[^\n]*$", re.M)


def _missing_tools() -> list[str]:
    path = f"{GOBIN}{os.pathsep}{os.environ.get('PATH', '')}"
    return [t for t in ("protoc", "protoc-gen-go", "protoc-gen-go-grpc") if shutil.which(t, path=path) is None]


def _normalised(data: bytes) -> bytes:
    return PROTOC_LINE.sub(b"// \tprotoc (version of the OS package)", data)


def test_regenerating_the_go_stubs_changes_nothing():
    missing = _missing_tools()
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: apt-get install protobuf-compiler; "
                    "api/generate.sh --install-tools")
    out = Path(tempfile.mkdtemp(prefix="cci-go-stubs-"))
    try:
        run = subprocess.run(["bash", str(API / "generate.sh"), str(out)], capture_output=True, text=True,
                             timeout=120, env={**os.environ, "GOBIN": str(GOBIN)})
        assert run.returncode == 0, f"api/generate.sh failed: {run.stderr.strip()}"
        written = sorted(p.relative_to(out) for p in out.rglob("*.pb.go"))
        checked_in = sorted(p.relative_to(API) for p in API.rglob("*.pb.go"))
        assert written == checked_in
        assert written, "api/generate.sh wrote no .pb.go file"
        for rel in written:
            assert _normalised((out / rel).read_bytes()) == _normalised((API / rel).read_bytes()), \
                f"api/{rel} differs from its regeneration; run api/generate.sh and commit the result"
    finally:
        shutil.rmtree(out)


def test_the_go_stubs_serve_the_documented_service():
    # Independent of protoc: the generated service must carry the full method names the harness dials.
    grpc_stub = (API / "cci" / "v1alpha1" / "cci_v1alpha1_grpc.pb.go").read_text()
    for method in ("CCIAdmit", "CCIAddContainerResource", "CCIRemoveContainerResource"):
        assert f'"/cci.v1alpha1.CCIDriver/{method}"' in grpc_stub
    assert "package cciv1alpha1" in grpc_stub
