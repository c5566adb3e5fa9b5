"""A dra/v1 driver's image is built the way its manifest says, and deployed under its own program and name."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from cci_conformance.dra import driver_image, upstream_image
from cci_conformance.dra.deployment import DriverDeployment, objects
from cci_conformance.drivers.manifest import load_manifest
from cci_conformance.errors import ConfigError
from cci_conformance.kind.image import go_source, gobuild
from cci_conformance.paths import DRA_MUTANTS_DIR, DRIVERS_DIR


@pytest.fixture
def builds(monkeypatch):
    made = []

    def from_source(source, main=".", *, repository=None, file="", field="kind.source"):
        made.append(("source", source, main))
        assert field == "dra.source" and file.endswith("driver.yaml")
        program = go_source.read_tree(source, main, file=file, field=field).program
        return SimpleNamespace(reference="source:1", archive=None, binary=Path("bin") / program, reused=False)

    def from_module(version):
        made.append(("module", version))
        return SimpleNamespace(reference="module:1", archive=None, reused=False)
    monkeypatch.setattr(go_source, "build_image", from_source)
    monkeypatch.setattr(upstream_image, "build_image", from_module)
    return made


def test_a_source_tree_is_built_from_the_tree_and_a_module_from_its_version(builds):
    reference = driver_image.build(load_manifest(DRIVERS_DIR / "dra-reference"))
    cpu = driver_image.build(load_manifest(DRIVERS_DIR / "dra-driver-cpu"))
    assert builds == [("source", (DRIVERS_DIR / "dra-reference").resolve(), "."), ("module", "v0.2.0")]
    assert (reference.program, reference.driver_name) == ("/dra-reference", "dra-reference.cci-conformance.example")
    assert (cpu.program, cpu.driver_name) == ("/dracpu", "dra.cpu")


def test_an_unknown_module_without_a_source_tree_is_a_config_error_naming_the_fix(builds, tmp_path):
    (tmp_path / "driver.yaml").write_text("name: d\nprotocol: dra/v1\ncapabilities: []\nversion: v1.0.0\n"
                                          "dra: {module: example.com/vendor/driver, device_class: d.example}\n")
    with pytest.raises(ConfigError, match="dra.source") as caught:
        driver_image.build(load_manifest(tmp_path))
    assert "example.com/vendor/driver" in str(caught.value) and not builds


def test_the_daemonset_runs_the_drivers_program_and_the_device_class_selects_its_name():
    plan = DriverDeployment("localhost/x:1", "w1", program="/dra-reference",
                            driver_name="dra-reference.cci-conformance.example", extra_args=("--mutant=slow-prepare",))
    made = {o["kind"]: o for o in objects(plan)}
    command = made["DaemonSet"]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[0] == "/dra-reference" and command[-1] == "--mutant=slow-prepare"
    assert made["DeviceClass"]["metadata"]["name"] == plan.driver_name
    assert made["DeviceClass"]["spec"]["selectors"][0]["cel"]["expression"] == \
        'device.driver == "dra-reference.cci-conformance.example"'


def test_a_source_trees_main_package_names_the_program(builds, tmp_path):
    # an upstream checkout (dra-driver-cpu keeps its main package in cmd/dracpu) under a name of its own
    tree = tmp_path / "checkout"
    (tree / "cmd" / "dracpu").mkdir(parents=True)
    (tree / "cmd" / "dracpu" / "main.go").write_text("package main\n\nfunc main() {}\n")
    (tree / "go.mod").write_text("module example.com/d\n")
    (tmp_path / "driver.yaml").write_text("name: d\nprotocol: dra/v1\ncapabilities: []\n"
                                          "dra: {module: example.com/d, device_class: dra.cpu, source: checkout, "
                                          "main: ./cmd/dracpu}\n")
    built = driver_image.build(load_manifest(tmp_path))
    assert builds == [("source", tree.resolve(), "./cmd/dracpu")]
    assert built.program == "/dracpu" and built.driver_name == "dra.cpu"


def test_a_main_package_without_a_source_tree_is_a_config_error(tmp_path):
    (tmp_path / "driver.yaml").write_text("name: d\nprotocol: dra/v1\ncapabilities: []\nversion: v1.0.0\n"
                                          "dra: {module: example.com/d, device_class: d.example, main: ./cmd/d}\n")
    with pytest.raises(ConfigError, match="dra.source") as caught:
        load_manifest(tmp_path)
    assert caught.value.field == "dra.main"


def test_a_bad_main_package_of_a_source_tree_is_named_as_dra_main(tmp_path):
    (tmp_path / "go.mod").write_text("module example.com/d\n")
    with pytest.raises(ConfigError) as caught:
        go_source.read_tree(tmp_path, "./cmd/none", file="driver.yaml", field="dra.source")
    assert caught.value.field == "dra.main"


def test_our_reference_and_its_mutants_share_one_build_of_the_tree(tmp_path, monkeypatch):
    # go_source, the builder of a CCI driver's kind.source, builds dra.source too; its repository is named after the
    # program, so the ten mutants (one tree, another flag each) reuse the reference's image
    monkeypatch.setenv("CCI_KIND_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(gobuild, "go_version", lambda: "go-test")
    monkeypatch.setattr(go_source.shutil, "which", lambda name: f"/usr/bin/{name}")
    compiled = []

    def fake_go(argv, **kwargs):
        compiled.append(argv)
        out = Path(argv[argv.index("-o") + 1])
        out.write_bytes(b"\x7fELF fake")
        out.chmod(0o755)
        return ""
    monkeypatch.setattr(go_source, "run", fake_go)
    reference = driver_image.build(load_manifest(DRIVERS_DIR / "dra-reference"))
    mutant = driver_image.build(load_manifest(DRA_MUTANTS_DIR / "slow-prepare"))
    assert reference.reference.startswith("localhost/cci-conformance/dra-reference:") and not reference.reused
    assert (mutant.reference, mutant.reused, len(compiled)) == (reference.reference, True, 1)
    assert reference.program == mutant.program == "/dra-reference"
    assert mutant.args == ("--mutant=slow-prepare",) and reference.args == ()


def _vendor_manifest(tmp_path, dra: str) -> Path:
    (tmp_path / "driver.yaml").write_text(f"name: v\nprotocol: dra/v1\ncapabilities: []\ndra: {dra}\n")
    return tmp_path


def test_a_vendor_archive_is_loaded_as_is_under_its_own_reference_and_program(builds, tmp_path):
    from cci_conformance.kind.image.oci_archive import ImageSpec, write_archive

    program = tmp_path / "prog"
    program.write_bytes(b"\x7fELF")
    write_archive(ImageSpec("registry.example/vendor/cpu-driver:1.2.3", {"/usr/bin/cpu-driver": program}),
                  tmp_path / "driver.tar")
    manifest = load_manifest(_vendor_manifest(tmp_path, "{device_class: cpu.vendor.example, image: driver.tar, "
                                                         "program: /usr/bin/cpu-driver, args: [--fast]}"))
    built = driver_image.build(manifest)
    assert not builds  # nothing built
    assert (built.reference, built.archive, built.program) == \
        ("registry.example/vendor/cpu-driver:1.2.3", (tmp_path / "driver.tar").resolve(), "/usr/bin/cpu-driver")
    assert (built.driver_name, built.args, built.origin) == ("cpu.vendor.example", ("--fast",), "vendor archive")


@pytest.mark.parametrize(("dra", "field", "says"), [
    ("{device_class: c, image: driver.tar}", "dra.program", "executable"),
    ("{device_class: c, program: /d}", "dra.program", "no dra.image"),
    ("{device_class: c}", "dra.module", "no way to get"),
    ("{device_class: c, image: missing.tar, program: /d}", "dra.image", "does not exist"),
    ("{device_class: c, image: driver.tar, program: d}", "dra.program", "does not match"),
])
def test_a_vendor_archive_manifest_without_its_parts_is_a_config_error_naming_the_field(tmp_path, dra, field, says):
    (tmp_path / "driver.tar").write_bytes(b"")
    with pytest.raises(ConfigError, match=says) as caught:
        load_manifest(_vendor_manifest(tmp_path, dra))
    assert caught.value.field == field


def test_an_archive_without_a_tagged_image_names_dra_image(tmp_path):
    (tmp_path / "driver.tar").write_bytes(b"not a tar")
    manifest = load_manifest(_vendor_manifest(tmp_path, "{device_class: c, image: driver.tar, program: /d}"))
    with pytest.raises(ConfigError, match="not a readable image archive") as caught:
        driver_image.build(manifest)
    assert caught.value.field == "dra.image"
