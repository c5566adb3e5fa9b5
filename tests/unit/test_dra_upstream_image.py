"""Unit tests of the dra-driver-cpu build: the wrapper module, the image layout and its cache key."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from cci_conformance.dra import upstream_image
from cci_conformance.errors import ConfigError
from cci_conformance.kind.image import gobuild
from cci_conformance.kind.image.oci_archive import write_archive

# The head of v0.2.0's go.mod as the proxy serves it: no replace directives, so the wrapper needs none.
UPSTREAM_GOMOD = """module github.com/kubernetes-sigs/dra-driver-cpu

go 1.26.0

require (
\tgithub.com/containerd/nri v0.11.0
\tk8s.io/api v0.36.0
\tk8s.io/dynamic-resource-allocation v0.36.0
)
"""


def test_wrapper_module_requires_the_exact_version_and_imports_the_driver(tmp_path, monkeypatch):
    monkeypatch.setattr(gobuild, "_upstream_gomod", lambda component, workdir, log: UPSTREAM_GOMOD)
    comp = upstream_image.component("v0.2.0")
    gobuild.write_wrapper_module(comp, tmp_path, tmp_path / "log")
    gomod = (tmp_path / "go.mod").read_text()
    # An exact require is what lets the build avoid the version list the proxy refuses.
    assert "require github.com/kubernetes-sigs/dra-driver-cpu v0.2.0\n" in gomod
    assert "replace" not in gomod
    assert '_ "github.com/kubernetes-sigs/dra-driver-cpu/cmd/dracpu"' in (tmp_path / "tools.go").read_text()
    assert comp.binaries == {"dracpu": "github.com/kubernetes-sigs/dra-driver-cpu/cmd/dracpu"}


def test_component_name_differs_per_version_so_cache_steps_never_mix():
    # Only one version is served today; a second target must not reuse the first one's step.
    names = {upstream_image.component(t.version).name for t in upstream_image.TARGETS}
    assert len(names) == len(upstream_image.TARGETS)
    assert all(upstream_image.component(t.version).name.endswith(t.version) for t in upstream_image.TARGETS)


def test_unknown_version_is_refused_with_the_served_ones_named():
    with pytest.raises(ConfigError) as err:
        upstream_image.component("v9.9.9")
    message = str(err.value)
    assert "--version" in message and "v0.2.0" in message and "fix:" in message


def _layer_members(archive: Path) -> tuple[dict, dict[str, tarfile.TarInfo], dict[str, bytes]]:
    with tarfile.open(archive) as outer:
        index = json.load(outer.extractfile("index.json"))
        manifest_digest = index["manifests"][0]["digest"].split(":")[1]
        manifest = json.load(outer.extractfile(f"blobs/sha256/{manifest_digest}"))
        config = json.load(outer.extractfile(f"blobs/sha256/{manifest['config']['digest'].split(':')[1]}"))
        layer = outer.extractfile(f"blobs/sha256/{manifest['layers'][0]['digest'].split(':')[1]}").read()
    with tarfile.open(fileobj=io.BytesIO(layer)) as inner:
        infos = {m.name: m for m in inner.getmembers()}
        data = {m.name: inner.extractfile(m).read() for m in inner.getmembers() if m.isfile()}
    return {"index": index, "config": config}, infos, data


def test_image_holds_the_binary_its_diagnostics_alias_and_tmp(tmp_path):
    binary = tmp_path / "dracpu"
    binary.write_bytes(b"\x7fELF driver")
    binary.chmod(0o755)
    archive = write_archive(upstream_image.image_spec(binary, "v0.2.0"), tmp_path / "img.tar")
    meta, infos, data = _layer_members(archive)
    assert meta["index"]["manifests"][0]["annotations"]["io.containerd.image.name"] == \
        "localhost/cci-conformance/dra-driver-cpu:v0.2.0"
    assert meta["config"]["config"]["Entrypoint"] == ["/dracpu"]
    assert data["dracpu"] == b"\x7fELF driver" and infos["dracpu"].mode & 0o111
    # The driver switches to its diagnostics mode when run as dracpu-gatherinfo (cmd/dracpu main).
    assert infos["dracpu-gatherinfo"].issym() and infos["dracpu-gatherinfo"].linkname == "dracpu"
    assert infos["tmp"].isdir()


def _fake_build(tmp_path: Path, content: bytes):
    out = tmp_path / "bin"
    out.mkdir(exist_ok=True)
    (out / "dracpu").write_bytes(content)
    (out / "dracpu").chmod(0o755)
    return lambda component: out


def test_image_archive_is_cached_by_binary_digest(tmp_path, monkeypatch):
    monkeypatch.setenv("CCI_KIND_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(gobuild, "go_version", lambda: "go-test")
    monkeypatch.setattr(gobuild, "build", _fake_build(tmp_path, b"\x7fELF one"))
    first = upstream_image.build_image("v0.2.0")
    stamp = first.archive.stat().st_mtime_ns
    again = upstream_image.build_image("v0.2.0")
    assert again.archive == first.archive and again.archive.stat().st_mtime_ns == stamp
    assert first.reused is False and again.reused is True
    monkeypatch.setattr(gobuild, "build", _fake_build(tmp_path, b"\x7fELF two"))
    rebuilt = upstream_image.build_image("v0.2.0")
    assert rebuilt.archive != first.archive and rebuilt.binary_sha256 != first.binary_sha256


def test_a_build_without_the_binary_fails_loudly(tmp_path, monkeypatch):
    monkeypatch.setenv("CCI_KIND_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(gobuild, "go_version", lambda: "go-test")
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setattr(gobuild, "build", lambda component: empty)
    with pytest.raises(Exception, match="without an executable"):
        upstream_image.build_image("v0.2.0")


@pytest.mark.slow
def test_v0_2_0_really_builds_from_the_module_proxy():
    """Builds the driver through the wrapper module (cold: minutes; warm: seconds)."""
    if shutil.which("go") is None:
        pytest.skip("go is not installed: the driver is built from its Go module")
    built = upstream_image.build_image("v0.2.0")
    head = built.binary.read_bytes()[:20]
    assert head[:4] == b"\x7fELF" and head[4] == 2  # 64-bit ELF
    proc = subprocess.run([str(built.binary), "-h"], capture_output=True, timeout=60, check=False,
                          env={**os.environ, "HOST_ROOT": "/nonexistent"})
    usage = proc.stderr.decode()
    # The flags the harness's DaemonSet passes must exist in this version.
    for flag in ("-cpu-device-mode", "-reserved-cpus", "-hostname-override", "-bind-address", "-group-by"):
        assert flag in usage, f"{flag} missing from dracpu -h of {built.version}"
    _, infos, _ = _layer_members(built.archive)
    assert infos["dracpu"].size == built.binary.stat().st_size


def test_cli_prints_one_json_line_per_version_and_refuses_unknown_ones(tmp_path, monkeypatch, capsys):
    from cci_conformance.cli import main

    monkeypatch.setenv("CCI_KIND_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(gobuild, "go_version", lambda: "go-test")
    monkeypatch.setattr(gobuild, "build", _fake_build(tmp_path, b"\x7fELF cli"))
    assert main(["kind", "build-dra-cpu", "--version", "v0.2.0"]) == 0
    line = json.loads(capsys.readouterr().out.strip())
    assert line["image"] == "localhost/cci-conformance/dra-driver-cpu:v0.2.0"
    assert Path(line["archive"]).is_file() and line["reused"] is False
    assert main(["kind", "build-dra-cpu", "--version", "v0.3.0"]) == 2
    assert "--version" in capsys.readouterr().err
