"""The reference DRA CPU driver's manifest and its one-file image, without building it."""

from __future__ import annotations

import shutil
from pathlib import Path

from cci_conformance.drivers.manifest import load_manifest
from cci_conformance.kind.image import go_source, gobuild

DRA_REFERENCE = Path(__file__).resolve().parents[2] / "drivers_under_test" / "dra-reference"


def test_manifest_is_a_dra_driver_built_from_its_source():
    manifest = load_manifest(DRA_REFERENCE)
    assert manifest.is_dra and manifest.name == "dra-reference"
    assert manifest.dra_module == "github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference"


def test_image_is_the_static_binary_alone(tmp_path):
    tree = go_source.read_tree(DRA_REFERENCE)
    assert tree.program == "dra-reference"
    assert go_source.default_repository(tree.program) == "localhost/cci-conformance/dra-reference"
    binary = tmp_path / tree.program
    binary.write_bytes(b"\x7fELF")
    spec = go_source.image_spec(binary, "localhost/cci-conformance/dra-reference:k1")
    assert spec.files == {"/dra-reference": binary} and spec.entrypoint == ["/dra-reference"]


def test_image_key_follows_the_go_sources_only(tmp_path, monkeypatch):
    copy = tmp_path / "dra-reference"
    shutil.copytree(DRA_REFERENCE, copy, ignore=shutil.ignore_patterns("bin", "testdata"))
    monkeypatch.setattr(gobuild, "go_version", lambda: "go1.99")

    def inputs(tree):
        return go_source.step_inputs(go_source.read_tree(tree), "localhost/cci-conformance/dra-reference")
    first = inputs(copy)
    ((_, files),) = first[0]
    names = [rel for rel, _ in files]
    assert "main.go" in names and "internal/pinning/grants.go" in names and "go.sum" in names
    assert not any(rel.endswith("_test.go") for rel in names)
    (copy / "internal" / "pinning" / "extra_test.go").write_text("package pinning\n")  # tests are not in the binary
    (copy / "README.md").write_text("changed\n")
    assert inputs(copy) == first
    grants = copy / "internal" / "pinning" / "grants.go"
    grants.write_text(grants.read_text() + "\n// changed\n")
    assert inputs(copy) != first
