"""A dra/v1 driver's image is built the way its manifest says, and deployed under its own program and name."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from cci_conformance.dra import driver_image, upstream_image
from cci_conformance.dra.deployment import DriverDeployment, objects
from cci_conformance.drivers.manifest import load_manifest
from cci_conformance.errors import ConfigError
from cci_conformance.kind.image import dra_reference_driver
from cci_conformance.paths import DRIVERS_DIR


@pytest.fixture
def builds(monkeypatch):
    made = []

    def built(kind):
        def build(*args):
            made.append((kind, *args))
            return SimpleNamespace(reference=f"{kind}:1", archive=None, reused=False)
        return build
    monkeypatch.setattr(dra_reference_driver, "build_image", built("source"))
    monkeypatch.setattr(upstream_image, "build_image", built("module"))
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
