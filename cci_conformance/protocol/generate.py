"""Regenerate the checked-in Python stubs from the .proto files (run: python -m cci_conformance.protocol.generate)."""

from __future__ import annotations

import sys
from pathlib import Path

PROTO_DIR = Path(__file__).parent / "protos"
REPO_ROOT = Path(__file__).resolve().parents[2]


def generate(out_root: Path = REPO_ROOT) -> list[Path]:
    """Run grpc_tools.protoc over every .proto; return the files written under ``out_root``."""
    from grpc_tools import protoc  # dev-only dependency

    protos = sorted(PROTO_DIR.glob("*.proto"))
    rel = [str(p.resolve().relative_to(REPO_ROOT)) for p in protos]
    # The include root is the repository root, so generated imports are package-absolute
    # ("from cci_conformance.protocol.protos import x_pb2").
    rc = protoc.main(["protoc", f"-I{REPO_ROOT}", f"--python_out={out_root}", f"--pyi_out={out_root}",
                      f"--grpc_python_out={out_root}", *rel])
    if rc != 0:
        raise SystemExit(f"protoc failed with exit code {rc}")
    return sorted((out_root / "cci_conformance/protocol/protos").glob("*_pb2*.py*"))


if __name__ == "__main__":
    for path in generate():
        print(path)
    sys.exit(0)
