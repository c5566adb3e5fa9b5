"""The Python driver image: app layer layout, cache keys per layer, archive shape, errors; base and wheels faked."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path, PurePosixPath

import pytest

from cci_conformance.drivers.manifest import load_manifest, parse_manifest
from cci_conformance.errors import ConfigError
from cci_conformance.kind.image import python_driver as pdi
from cci_conformance.kind.image import python_layers
from cci_conformance.kind.image.cache import Step
from cci_conformance.kind.image.oci_archive import ImageSpec, layer_bytes
from cci_conformance.kind.image.oci_layers import gzip_layer_bytes
from cci_conformance.kind.runner import CommandFailed

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "drivers_under_test" / "reference"
MUTANT = REPO / "drivers_under_test" / "mutants" / "off-by-one"


def _fake_layer(name: str, content: bytes):
    step = Step(f"fake-{name}", content.decode())
    step.prepare()
    source = step.dir / "content"
    source.write_bytes(content)
    layer = gzip_layer_bytes(layer_bytes(ImageSpec(reference="x:y", files={f"/{name}": source})),
                             step.dir / f"{name}.tar.gz")
    step.finish(python_version="3.11", **layer.facts())
    return step, layer


@pytest.fixture
def faked(monkeypatch, tmp_path):
    """Base and wheel layers are tiny fakes in a private cache: no debootstrap, no pip, no network."""
    monkeypatch.setenv("CCI_KIND_CACHE", str(tmp_path / "cache"))
    calls = []
    monkeypatch.setattr(pdi, "build_base", lambda: calls.append("base") or _fake_layer("base", b"base"))
    monkeypatch.setattr(pdi, "build_deps", lambda version: calls.append(version) or _fake_layer("deps", b"deps"))
    return calls


def _outside_driver(tmp_path: Path) -> Path:
    folder = tmp_path / "my-driver"
    folder.mkdir()
    shutil.copy(MUTANT / "driver.yaml", folder / "driver.yaml")
    (folder / "driver.py").write_text("print('v1')\n")
    for left in ("bin/driver", "__pycache__/driver.cpython-311.pyc", "helper.pyc", "driver.log", ".hidden"):
        (folder / left).parent.mkdir(exist_ok=True)
        (folder / left).write_text("x")
    return folder


def test_mutant_layout_keeps_project_paths_so_parents_3_is_the_root():
    manifest = load_manifest(MUTANT)
    files = pdi.app_files(manifest)
    workdir = pdi.driver_location(manifest)
    assert workdir == f"{pdi.APP_ROOT}/drivers_under_test/mutants/off-by-one"
    assert PurePosixPath(workdir, "driver.py").parents[3] == PurePosixPath(pdi.APP_ROOT)
    for needed in ("cci_conformance/__init__.py", "cci_conformance/driver_sdk/runner.py",
                   "cci_conformance/protocol/protos/cci_v1alpha1_pb2.py", "drivers_under_test/__init__.py",
                   "drivers_under_test/reference/policy.py", "drivers_under_test/mutants/off-by-one/driver.py"):
        assert f"{pdi.APP_ROOT}/{needed}" in files, needed
    assert not [p for p in files if "__pycache__" in p or p.endswith(".pyc") or "/tests/" in p]
    assert all(p.startswith(pdi.APP_ROOT + "/") for p in files)


def test_reference_layout_and_parents_2():
    manifest = load_manifest(REFERENCE)
    workdir = pdi.driver_location(manifest)
    assert PurePosixPath(workdir, "driver.py").parents[2] == PurePosixPath(pdi.APP_ROOT)
    assert f"{workdir}/driver.py" in pdi.app_files(manifest)


def test_outside_driver_goes_to_opt_driver_without_leftovers(tmp_path):
    manifest = load_manifest(_outside_driver(tmp_path))
    files = pdi.app_files(manifest)
    assert pdi.driver_location(manifest) == pdi.OUTSIDE_DRIVER_DIR
    assert sorted(p for p in files if p.startswith(pdi.OUTSIDE_DRIVER_DIR)) == [
        "/opt/driver/driver.py", "/opt/driver/driver.yaml"]


def test_non_python_command_is_a_config_error(faked, tmp_path):
    data = {"name": "native", "protocol": "cci/v1alpha1", "capabilities": ["exclusive"],
            "local": {"command": ["./bin/driver", "--registry-dir={registry_dir}"]}}
    manifest = parse_manifest(data, tmp_path / "driver.yaml")
    with pytest.raises(ConfigError) as info:
        pdi.build_python_image(manifest)
    assert info.value.file == str(tmp_path / "driver.yaml")
    assert info.value.field == "local.command" and "{python}" in info.value.fix
    assert faked == []  # refused before building anything


def _archive(path: Path) -> tuple[dict, dict, list]:
    with tarfile.open(path) as tar:
        read = lambda name: json.loads(tar.extractfile(name).read())  # noqa: E731
        index = read("index.json")
        manifest = read(f"blobs/sha256/{index['manifests'][0]['digest'].split(':')[1]}")
        config = read(f"blobs/sha256/{manifest['config']['digest'].split(':')[1]}")
        docker = read("manifest.json")
        names = set(tar.getnames())
    assert all(f"blobs/sha256/{layer['digest'].split(':')[1]}" in names for layer in manifest["layers"])
    return manifest, config, docker


def test_archive_has_three_layers_for_containerd_and_docker(faked, tmp_path):
    image = pdi.build_python_image(load_manifest(MUTANT))
    manifest, config, docker = _archive(image.archive)
    assert len(manifest["layers"]) == 3 == len(config["rootfs"]["diff_ids"])
    assert [layer.digest for layer in image.layers] == [layer["digest"] for layer in manifest["layers"]]
    assert config["config"]["WorkingDir"] == image.working_dir
    assert f"PYTHONPATH={pdi.APP_ROOT}:{python_layers.DEPS_DIR}" in config["config"]["Env"]
    assert docker[0]["RepoTags"] == [image.reference]
    assert docker[0]["Layers"] == [f"blobs/sha256/{layer['digest'].split(':')[1]}" for layer in manifest["layers"]]
    assert image.reference == f"{pdi.IMAGE_REPOSITORY}:{image.reference.rsplit(':', 1)[1]}"
    assert image.python == "/usr/bin/python3" and not image.reused
    with tarfile.open(image.layers[2].path) as app:
        assert f"{image.working_dir.lstrip('/')}/driver.py" in app.getnames()


def test_driver_change_changes_only_the_app_layer(faked, tmp_path):
    folder = _outside_driver(tmp_path)
    first = pdi.build_python_image(load_manifest(folder))
    again = pdi.build_python_image(load_manifest(folder))
    assert again.reused and again.reference == first.reference
    (folder / "driver.py").write_text("print('v2')\n")
    changed = pdi.build_python_image(load_manifest(folder))
    assert not changed.reused and changed.reference != first.reference
    assert [layer.digest for layer in changed.layers[:2]] == [layer.digest for layer in first.layers[:2]]
    assert changed.layers[2].digest != first.layers[2].digest
    (folder / "driver.log").write_text("a new log line")  # a leftover is no input
    assert pdi.build_python_image(load_manifest(folder)).reference == changed.reference


def test_pins_are_this_environments_versions_with_their_requirements():
    pins = dict(pin.split("==") for pin in python_layers.pinned_requirements("3.11"))
    for name in ("grpcio", "protobuf"):
        assert pins[name] == importlib.metadata.version(name)
    assert "typing-extensions" in pins  # grpcio's requirement


def test_runtime_distributions_cover_what_the_driver_imports():
    # grpc imports grpc_tools only if it happens to be installed (grpc/__init__.py); the driver never needs it.
    optional = {"grpcio-tools", "cci-conformance"}
    # Only what the imports add: site's .pth hooks (setuptools' distutils shim) load modules before them.
    probe = ("import sys, importlib.metadata as md; before = set(sys.modules); import cci_conformance.driver_sdk, "
             "drivers_under_test.reference.policy; dists = md.packages_distributions(); "
             "print(sorted({d for m in set(sys.modules) - before for d in dists.get(m.split('.')[0], [])}))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True).stdout
    imported = {name.lower().replace("_", "-") for name in json.loads(out.replace("'", '"'))}
    pinned = {pin.split("==")[0] for pin in python_layers.pinned_requirements("3.11")}
    assert imported - optional <= pinned


def test_pip_gets_binary_wheels_for_the_image_python(tmp_path):
    argv = python_layers._pip_argv("3.11", ("grpcio==1.0",), tmp_path)
    assert "--only-binary=:all:" in argv and "--no-deps" in argv
    assert argv[argv.index("--python-version") + 1] == "3.11" and "cp311" in argv
    assert "manylinux_2_17_x86_64" in argv and "manylinux_2_36_x86_64" in argv
    assert argv[argv.index("--target") + 1] == str(tmp_path) and argv[-1] == "grpcio==1.0"


def test_unservable_python_version_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("CCI_KIND_CACHE", str(tmp_path))

    def no_wheel(argv, **kwargs):
        raise CommandFailed("pip exited 1:\nERROR: No matching distribution found for grpcio==1.85.3")

    monkeypatch.setattr(python_layers, "run", no_wheel)
    with pytest.raises(CommandFailed, match=r"no binary wheel of grpcio==1.85.3 for CPython 3.99 manylinux"):
        python_layers.build_deps("3.99")


def test_a_drivers_stale_archives_are_pruned(faked, tmp_path):
    folder = _outside_driver(tmp_path)
    old = pdi.build_python_image(load_manifest(folder))
    other = Step("python-app", "another driver")
    other.prepare()
    other.finish(working_dir="/opt/cci-conformance/drivers_under_test/reference")
    (folder / "driver.py").write_text("print('v2')\n")
    fresh = pdi.build_python_image(load_manifest(folder))
    assert old.archive.is_file()  # younger than STALE_AFTER_S: a run may still be loading it
    for stamp in (old.archive.parent / ".done", other.dir / ".done"):
        os.utime(stamp, (0, 0))
    (folder / "driver.py").write_text("print('v3')\n")
    pdi.build_python_image(load_manifest(folder))
    assert not old.archive.parent.exists() and other.done and fresh.archive.is_file()
