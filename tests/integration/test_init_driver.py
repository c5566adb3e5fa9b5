"""`cci-conformance init-driver`: the skeletons register and refuse every claim.

What a certification run says of the Python skeleton is checked on the run docs/authors.md makes of it
(tests/integration/test_authors_guide.py): the same run, once."""

from __future__ import annotations

import shutil

import pytest

from cci_conformance.driver_sdk import PLUGIN_TYPE, SUPPORTED_VERSIONS
from cci_conformance.drivers.client import LocalDriver
from cci_conformance.drivers.manifest import load_manifest
from cci_conformance.drivers.scaffold import go_mod_tidy, init_driver
from cci_conformance.errors import ConfigError
from cci_conformance.topology import library

pytestmark = pytest.mark.integration
CLAIM = {"cores": ["2"], "cpu attributes": [["EXCLUSIVE"]], "mem attributes": ["NO-MEM-AFFINITY"],
         "device attributes": ["NO-DEVICE-AFFINITY"]}
TOPOLOGY = "server-2s8c-smt2-intel"


def assert_registers_and_refuses(folder, refusal: str) -> None:
    manifest = load_manifest(folder)
    assert manifest.version == "0.0.1" and manifest.capabilities == frozenset()
    with LocalDriver(manifest, library.load(TOPOLOGY)) as driver:
        info = driver.process.wait_registered()
        assert info.type == PLUGIN_TYPE and info.name == manifest.name
        assert list(info.supported_versions) == list(SUPPORTED_VERSIONS)
        assert info.endpoint == str(driver.process.plugin_dir / "cci.sock")
        reply = driver.client.admit(pod="p1", container="c", claim_uid="u1", claim=CLAIM, available="0-31")
        assert refusal in reply.err and not reply.HasField("rSet") and not reply.groups
        assert driver.client.add(pod="p1", container="c", container_id="id1").err  # never admitted (S1.7)
        assert driver.client.remove(claim_uid="u1", container_id="id1").err == ""  # unknown: idempotent
        assert driver.process.terminate() == 0  # SIGTERM: a clean stop (S1.9)
    assert not driver.process.registration_socket.exists()


def test_python_skeleton_registers_and_refuses_every_claim(tmp_path):
    written = init_driver(tmp_path / "Acme CPU", "python")
    assert {p.name for p in written} == {"driver.yaml", "driver.py"}
    assert load_manifest(tmp_path / "Acme CPU").name == "acme-cpu"
    assert_registers_and_refuses(tmp_path / "Acme CPU", "choose_cpus is not written yet")


def test_init_never_overwrites_and_checks_its_arguments(tmp_path):
    init_driver(tmp_path / "d", "python", name="mine")
    before = (tmp_path / "d" / "driver.py").read_text()
    with pytest.raises(ConfigError, match="would overwrite"):
        init_driver(tmp_path / "d", "python")
    assert (tmp_path / "d" / "driver.py").read_text() == before
    with pytest.raises(ConfigError) as err:
        init_driver(tmp_path / "e", "python", name="Bad_Name")
    assert err.value.field == "--name"
    with pytest.raises(ConfigError) as err:
        init_driver(tmp_path / "f", "rust")
    assert err.value.field == "--lang"


@pytest.mark.slow
def test_go_skeleton_builds_with_local_build_and_registers(tmp_path):
    if shutil.which("go") is None:
        pytest.skip("go is not on PATH: the Go skeleton cannot be built here")
    folder = tmp_path / "gd"
    init_driver(folder, "go", name="go-skel")
    problem = go_mod_tidy(folder)
    if "dial tcp" in problem or "lookup" in problem:
        pytest.skip(f"no module proxy reachable for go mod tidy: {problem[:300]}")
    assert problem == ""
    assert load_manifest(folder).build[:2] == ("go", "build")
    # DriverProcess.start runs local.build first: the binary does not exist before.
    assert not (folder / "bin" / "go-skel").exists()
    assert_registers_and_refuses(folder, "admission is not written yet")
    assert (folder / "bin" / "go-skel").is_file()
