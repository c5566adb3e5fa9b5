"""A Go driver's image for kind from its own source tree: kind.source/kind.main, the generic Go build, the
`cci-conformance driver image` archive, the Go skeleton's kind section; Go faked except in the slow test."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from pathlib import Path

import pytest
import yaml

from cci_conformance.cli import main
from cci_conformance.drivers.manifest import load_manifest, parse_manifest
from cci_conformance.drivers.scaffold import init_driver
from cci_conformance.errors import ConfigError
from cci_conformance.kind.cci import driver_image
from cci_conformance.kind.image import go_driver, go_source, gobuild
from cci_conformance.kind.runner import CommandFailed

REPO = Path(__file__).resolve().parents[2]
GO_REFERENCE = REPO / "drivers_under_test" / "go-reference"
MAIN_GO = "package main\n\nfunc main() {}\n"
FLAGS = ["--registry-dir={registry_dir}", "--state-dir={state_dir}"]


def _module(folder: Path, module: str = "example.com/acme-cpu", main_dir: str = ".", extra: str = "") -> Path:
    (folder / main_dir).mkdir(parents=True, exist_ok=True)
    (folder / "go.mod").write_text(f"module {module}\n\ngo 1.24\n{extra}")
    (folder / main_dir / "main.go").write_text(MAIN_GO)
    return folder


def _manifest(folder: Path, kind: dict) -> dict:
    data = {"name": "acme-cpu", "protocol": "cci/v1alpha1", "capabilities": [],
            "local": {"command": ["bin/acme-cpu", *FLAGS]}, "kind": kind}
    (folder / "driver.yaml").write_text(yaml.safe_dump(data))
    return data


def _refusal(folder: Path, kind: dict) -> ConfigError:
    _manifest(folder, kind)
    with pytest.raises(ConfigError) as err:
        load_manifest(folder)
    assert err.value.file == str(folder / "driver.yaml") and err.value.fix
    return err.value


# --- the manifest -------------------------------------------------------------------------------------------


def test_kind_source_and_main_load_relative_to_the_manifest(tmp_path):
    _module(tmp_path / "src", main_dir="cmd/agent")
    _manifest(tmp_path, {"source": "src", "main": "./cmd/agent", "command": ["/agent", *FLAGS]})
    m = load_manifest(tmp_path)
    assert (m.kind_source, m.kind_main, m.kind_command) == ((tmp_path / "src").resolve(), "./cmd/agent",
                                                            ("/agent", *FLAGS))
    assert m.kind_image == ""


def test_go_reference_manifest_builds_from_its_own_folder_with_its_local_flags():
    m = load_manifest(GO_REFERENCE)
    assert m.kind_source == GO_REFERENCE.resolve() and m.kind_main == "." and not m.kind_image
    assert m.kind_command == ("/go-reference", *m.command[1:])  # what the folder special case used to build


def test_source_and_image_are_exclusive(tmp_path):
    _module(tmp_path)
    err = _refusal(tmp_path, {"source": ".", "image": "d.tar", "command": ["/acme-cpu"]})
    assert err.field == "kind.source" and "kind.image" in err.fix


@pytest.mark.parametrize("which", ["source", "image"])
def test_source_or_image_needs_the_command(tmp_path, which):
    _module(tmp_path)
    err = _refusal(tmp_path, {which: "." if which == "source" else "d.tar"})
    assert err.field == "kind.command" and f"kind.{which}" in err.problem


def test_main_needs_a_source(tmp_path):
    assert _refusal(tmp_path, {"main": "./cmd/x", "image": "d.tar", "command": ["/x"]}).field == "kind.main"


def test_a_source_without_go_mod_is_refused(tmp_path):
    (tmp_path / "src").mkdir()
    err = _refusal(tmp_path, {"source": "src", "command": ["/src"]})
    assert err.field == "kind.source" and "no go.mod" in err.problem


def test_a_missing_main_package_is_refused(tmp_path):
    _module(tmp_path)
    err = _refusal(tmp_path, {"source": ".", "main": "./cmd/none", "command": ["/none"]})
    assert err.field == "kind.main" and "does not exist" in err.problem
    (tmp_path / "main.go").write_text("package acme\n")
    err = _refusal(tmp_path, {"source": ".", "command": ["/acme-cpu"]})
    assert err.field == "kind.source" and "not a main package" in err.problem


def test_main_is_a_relative_package_path(tmp_path):
    _module(tmp_path, main_dir="cmd/x")
    assert _refusal(tmp_path, {"source": ".", "main": "cmd/x", "command": ["/x"]}).field == "kind.main"


@pytest.mark.parametrize(("module", "main_dir", "program"), [
    ("example.com/acme-cpu", ".", "/acme-cpu"),
    ("example.com/acme/v2", ".", "/acme"),  # go build's name: a major-version element is skipped
    ("example.com/acme", "./cmd/agent", "/agent"),
])
def test_the_command_starts_the_program_go_build_names(tmp_path, module, main_dir, program):
    _module(tmp_path, module, main_dir)
    kind = {"source": ".", "command": [program, *FLAGS], **({"main": main_dir} if main_dir != "." else {})}
    _manifest(tmp_path, kind)
    assert load_manifest(tmp_path).kind_command[0] == program
    err = _refusal(tmp_path, {**kind, "command": ["/driver", *FLAGS]})
    assert err.field == "kind.command[0]" and f"start kind.command with {program}" in err.fix


def test_kind_command_placeholders_are_checked(tmp_path):
    _module(tmp_path)
    err = _refusal(tmp_path, {"source": ".", "command": ["/acme-cpu", "--x={nope}"]})
    assert err.field == "kind.command[1]"


# --- the generic build --------------------------------------------------------------------------------------


def test_go_reference_tree_lays_the_replaced_api_at_its_relative_place():
    tree = go_source.read_tree(GO_REFERENCE)
    (driver, driver_files), (api, api_files) = tree.modules
    assert (driver, api, tree.module_dir, tree.program) == ("drivers_under_test/go-reference", "api",
                                                            "drivers_under_test/go-reference", "go-reference")
    names = {name for name, _ in driver_files}
    assert {"go.mod", "go.sum", "main.go"} <= names and not any(n.endswith("_test.go") for n in names)
    assert "go.mod" in {name for name, _ in api_files}


def test_a_replace_inside_the_module_is_its_own_and_bad_replaces_are_refused(tmp_path):
    _module(tmp_path / "d", extra="\nreplace example.com/api => ./cci-api\n")
    _module(tmp_path / "d" / "cci-api", "example.com/api")
    tree = go_source.read_tree(tmp_path / "d")
    assert [rel for rel, _ in tree.modules] == ["."] and "cci-api/go.mod" in dict(tree.modules[0][1])
    _module(tmp_path / "e", extra="\nreplace (\n\texample.com/api v1.0.0 => ../missing // not there\n)\n")
    with pytest.raises(ConfigError) as err:
        go_source.read_tree(tmp_path / "e")
    assert err.value.field == "replace" and err.value.file == str(tmp_path / "e" / "go.mod")
    _module(tmp_path / "f", extra="\nreplace example.com/api => /opt/api\n")
    with pytest.raises(ConfigError, match="absolute path"):
        go_source.read_tree(tmp_path / "f")


@pytest.fixture
def fake_go(tmp_path, monkeypatch):
    """`go build` writes a fake executable (or fails with a log), in a private build cache."""
    monkeypatch.setenv("CCI_KIND_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(gobuild, "go_version", lambda: "go-test")
    monkeypatch.setattr(go_source.shutil, "which", lambda name: f"/usr/bin/{name}")
    builds: list[dict] = []

    def fake_run(argv, *, timeout, env, cwd, log, nice):
        builds.append({"argv": argv, "cwd": Path(cwd), "env": env,
                       "laid": sorted(p.relative_to(cwd.parent.parent).as_posix()
                                      for p in Path(cwd).parent.parent.rglob("go.mod"))})
        if os.environ.get("FAKE_GO_FAILS"):
            log.write_text("$ go build\n" + "".join(f"line {i}\n" for i in range(40)) + "./main.go:3: undefined: x\n")
            raise CommandFailed("go build exited 1")
        out = Path(argv[argv.index("-o") + 1])
        out.write_bytes(b"\x7fELF fake")
        out.chmod(0o755)
        return ""

    monkeypatch.setattr(go_source, "run", fake_run)
    return builds


def _config(archive: Path) -> tuple[dict, dict[str, tarfile.TarInfo]]:
    with tarfile.open(archive) as tar:
        read = lambda name: json.loads(tar.extractfile(name).read())  # noqa: E731
        manifest = read(f"blobs/sha256/{read('index.json')['manifests'][0]['digest'].split(':')[1]}")
        config = read(f"blobs/sha256/{manifest['config']['digest'].split(':')[1]}")
        layer = tar.extractfile(f"blobs/sha256/{manifest['layers'][0]['digest'].split(':')[1]}")
        with tarfile.open(fileobj=layer) as files:
            members = {m.name: m for m in files.getmembers()}
    return config, members


def test_build_is_static_trimmed_cached_and_keyed_by_the_replaced_sources(tmp_path, fake_go):
    root = tmp_path / "repo"
    _module(root / "drivers" / "acme", extra="\nreplace example.com/api => ../../api\n")
    _module(root / "api", "example.com/api")
    first = go_source.build_image(root / "drivers" / "acme")
    build = fake_go[0]
    assert build["argv"][:3] == ["go", "build", "-trimpath"] and build["argv"][-1] == "."
    assert build["env"]["CGO_ENABLED"] == "0"
    assert build["laid"] == ["api/go.mod", "drivers/acme/go.mod"] and build["cwd"].name == "acme"
    assert first.reference.startswith("localhost/cci-conformance/acme-cpu:") and not first.reused
    assert driver_image.archive_reference(first.archive, "x") == first.reference
    config, members = _config(first.archive)
    assert config["config"]["Entrypoint"] == ["/acme-cpu"] and members["acme-cpu"].size == len(b"\x7fELF fake")
    assert go_source.build_image(root / "drivers" / "acme").reused and len(fake_go) == 1
    (root / "api" / "main.go").write_text(MAIN_GO + "// changed\n")
    assert go_source.build_image(root / "drivers" / "acme").reference != first.reference


def test_a_failed_build_is_a_config_error_with_the_end_of_its_log(tmp_path, fake_go, monkeypatch):
    _module(tmp_path / "d")
    monkeypatch.setenv("FAKE_GO_FAILS", "1")
    with pytest.raises(ConfigError) as err:
        go_source.build_image(tmp_path / "d", file="drv/driver.yaml")
    assert (err.value.file, err.value.field) == ("drv/driver.yaml", "kind.source")
    assert "undefined: x" in err.value.problem and "line 39" in err.value.problem
    assert "line 5\n" not in err.value.problem  # the end of the log only
    assert "go build" in err.value.fix and "build.log" in err.value.fix


def test_for_manifest_builds_kind_source_with_the_generic_go_build(tmp_path, monkeypatch):
    archive = tmp_path / "built.oci.tar"
    archive.write_bytes(b"archive")
    calls = []

    def fake_build(source, main=".", *, repository=None, file="", field="kind.source"):
        calls.append((source, main, repository, file))
        return go_source.BuiltDriverImage(f"{repository}:k1", archive, tmp_path / "go-reference", 0.0, True)

    monkeypatch.setattr(go_source, "build_image", fake_build)
    manifest = load_manifest(GO_REFERENCE)
    image = driver_image.for_manifest(manifest)
    assert calls == [(GO_REFERENCE.resolve(), ".", go_driver.IMAGE_REPOSITORY, str(manifest.path))]
    assert (image.reference, image.archive, image.origin) == (f"{go_driver.IMAGE_REPOSITORY}:k1", archive, "go build")
    assert image.command == ("/go-reference", *manifest.command[1:]) == manifest.kind_command
    assert image.digest == driver_image.file_digest(archive)


def test_the_go_reference_folder_is_no_special_case(tmp_path, monkeypatch):
    monkeypatch.setattr(go_source, "build_image", lambda *a, **k: pytest.fail("built without kind.source"))
    data = yaml.safe_load((GO_REFERENCE / "driver.yaml").read_text())
    del data["kind"]
    with pytest.raises(ConfigError) as err:
        driver_image.for_manifest(parse_manifest(data, GO_REFERENCE / "driver.yaml"))
    assert err.value.field == "kind.image" and "kind.source" in err.value.fix


def test_go_driver_builds_the_reference_through_the_generic_build(monkeypatch):
    calls = []
    monkeypatch.setattr(go_source, "build_image", lambda *a, **k: calls.append((a, k)) or "built")
    assert go_driver.build_image() == "built"
    assert calls == [((go_driver.DRIVER_SOURCE,), {"repository": go_driver.IMAGE_REPOSITORY,
                                                   "file": str(go_driver.DRIVER_SOURCE / "driver.yaml")})]
    assert go_driver.IMAGE_REPOSITORY == go_source.default_repository(load_manifest(GO_REFERENCE).name)


# --- `cci-conformance driver image` -------------------------------------------------------------------------


def test_driver_image_command_writes_the_archive_and_the_kind_section_to_paste(tmp_path, fake_go, capsys):
    folder = _module(tmp_path / "acme")
    data = _manifest(folder, {"source": ".", "command": ["/acme-cpu", *FLAGS]})
    assert main(["driver", "image", str(folder)]) == 0
    out = capsys.readouterr().out
    archive = folder / "acme-cpu.oci.tar"
    digest = driver_image.file_digest(archive)
    reference = driver_image.archive_reference(archive, "x")
    assert f"image:   {reference} (built in" in out and reference.startswith("localhost/cci-conformance/acme-cpu:")
    assert f"archive: {archive}" in out and f"sha256:  {digest.removeprefix('sha256:')}" in out
    section = yaml.safe_load(out[out.index("kind:\n"):])["kind"]
    assert section == {"image": "acme-cpu.oci.tar", "command": ["/acme-cpu", *FLAGS]}
    # Pasted in place of kind.source, the same image runs as a vendor archive.
    (folder / "driver.yaml").write_text(yaml.safe_dump({**data, "kind": section}))
    image = driver_image.for_manifest(load_manifest(folder))
    assert (image.reference, image.origin, image.command, image.digest) == (
        reference, "vendor archive", ("/acme-cpu", *FLAGS), digest)
    # Again with --out: the cached build, written elsewhere.
    assert main(["driver", "image", str(folder), "--out", str(tmp_path / "out" / "d.tar")]) == 0
    out = capsys.readouterr().out
    assert "reused from the build cache" in out and f"image: {json.dumps(str(tmp_path / 'out' / 'd.tar'))}" in out
    assert len(fake_go) == 1


def test_driver_image_command_on_a_bare_go_module_and_on_a_folder_without_one(tmp_path, fake_go, capsys):
    folder = _module(tmp_path / "plain", "example.com/plain", "cmd/plaind")
    assert main(["driver", "image", str(folder), "--main", "./cmd/plaind"]) == 0
    section = yaml.safe_load(capsys.readouterr().out.split("local.command):\n", 1)[1])["kind"]
    assert section == {"image": "plaind.oci.tar", "command": ["/plaind"]}
    (tmp_path / "empty").mkdir()
    assert main(["driver", "image", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert "kind.source" in err and "docker save" in err


# --- init-driver --lang go ----------------------------------------------------------------------------------


def test_go_skeleton_manifest_builds_its_module_on_kind(tmp_path):
    folder = tmp_path / "Acme Go"
    init_driver(folder, "go", name="acme-go")
    m = load_manifest(folder)
    assert m.kind_source == folder.resolve() and m.kind_main == "."
    assert m.kind_command == ("/acme-go", *m.command[1:])
    tree = go_source.read_tree(m.kind_source)  # go.mod's replace => ./cci-api is inside the module
    assert [rel for rel, _ in tree.modules] == ["."] and tree.program == "acme-go"


# --- the real build -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_go_reference_really_builds_through_the_generic_build(tmp_path):
    """Builds drivers_under_test/go-reference with its ../../api into an archive (cold: minutes; warm: seconds)."""
    if shutil.which("go") is None:
        pytest.skip("go is not installed: the driver is built from its Go module")
    built = go_source.build_image(GO_REFERENCE, repository=go_driver.IMAGE_REPOSITORY)
    assert driver_image.archive_reference(built.archive, "x") == built.reference
    assert built.reference.startswith(go_driver.IMAGE_REPOSITORY + ":")
    config, members = _config(built.archive)
    assert config["config"]["Entrypoint"] == ["/go-reference"]
    assert set(members) == {"tmp", "go-reference"} and members["go-reference"].size == built.binary.stat().st_size
    head = built.binary.read_bytes()[:20]
    assert head[:4] == b"\x7fELF" and head[4] == 2  # a 64-bit ELF
    assert b"/lib64/ld-linux" not in built.binary.read_bytes()  # static: no interpreter
    assert go_driver.build_image().reference == built.reference  # the kind tests' image is this one


def test_driver_image_command_on_a_dra_driver_prints_the_dra_keys_that_load_it(tmp_path, fake_go, capsys):
    from cci_conformance.dra import driver_image as dra_image

    folder = _module(tmp_path / "acme")
    data = {"name": "acme-dra", "protocol": "dra/v1", "capabilities": [],
            "dra": {"module": "example.com/acme-cpu", "device_class": "cpu.acme.example", "source": "."}}
    (folder / "driver.yaml").write_text(yaml.safe_dump(data))
    assert main(["driver", "image", str(folder)]) == 0
    out = capsys.readouterr().out
    section = yaml.safe_load(out[out.index("dra:\n"):])["dra"]
    assert section == {"image": "acme-dra.oci.tar", "program": "/acme-cpu"}
    # Pasted in place of dra.source, the same image is loaded as the vendor's archive: nothing is built again.
    dra = {k: v for k, v in data["dra"].items() if k != "source"} | section
    (folder / "driver.yaml").write_text(yaml.safe_dump({**data, "dra": dra}))
    image = dra_image.build(load_manifest(folder))
    assert (image.program, image.origin, image.reference) == \
        ("/acme-cpu", "vendor archive", driver_image.archive_reference(folder / "acme-dra.oci.tar", "x"))
    assert len(fake_go) == 1
