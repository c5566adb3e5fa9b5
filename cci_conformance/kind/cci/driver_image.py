"""Which image runs a CCI driver on kind, with which command: one built from the driver's Go module (kind.source), a
Python driver's, or the vendor's archive (kind.image); docs/kind.md "Your driver on kind"."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

from ...drivers.manifest import MANIFEST_FILE, DriverManifest, load_manifest
from ...errors import ConfigError

PYTHON = "{python}"


@dataclass(frozen=True)
class KindDriverImage:
    """An image archive to load into the worker and the DaemonSet container's command (placeholders unfilled)."""

    reference: str
    archive: Path
    command: tuple[str, ...]  # argv[0] is a path inside the image
    origin: str  # how the harness got it: "go build", "python image", "vendor archive"
    digest: str  # sha256 of the archive file: what ran, for the report's driver identity
    python: str = ""  # the interpreter inside the image that {python} stands for
    working_dir: str = ""
    env: tuple[tuple[str, str], ...] = ()


def file_digest(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            sha.update(block)
    return "sha256:" + sha.hexdigest()


def archive_reference(archive: Path, manifest_file: str, field: str = "kind.image") -> str:
    """The image reference an archive carries: ``docker save``'s RepoTags or an OCI layout's ref-name annotation."""
    try:
        with tarfile.open(archive) as tar:
            names = set(tar.getnames())
            if "manifest.json" in names:
                entries = json.load(tar.extractfile("manifest.json"))
                tags = [t for e in entries for t in (e.get("RepoTags") or [])]
                if tags:
                    return tags[0]
            if "index.json" in names:
                for m in json.load(tar.extractfile("index.json")).get("manifests", []):
                    notes = m.get("annotations", {})
                    ref = notes.get("io.containerd.image.name") or notes.get("org.opencontainers.image.ref.name")
                    if ref and (":" in ref.rsplit("/", 1)[-1] or "@" in ref):
                        return ref
    except (tarfile.TarError, OSError, ValueError) as exc:
        raise ConfigError(f"{archive} is not a readable image archive: {exc}", file=manifest_file,
                          field=field,
                          fix="write it with `docker save -o driver.tar <image>:<tag>` (or an OCI layout tar)"
                          ) from None
    raise ConfigError(f"{archive} names no tagged image", file=manifest_file, field=field,
                      fix="save a tagged image: `docker save -o driver.tar <image>:<tag>`")


def for_manifest(manifest: DriverManifest) -> KindDriverImage:
    """The image that runs ``manifest``'s driver on kind: the vendor's archive (kind.image), the static binary of its
    Go module (kind.source), or for a ``{python}`` command the Python driver image; built offline and cached."""
    file = str(manifest.path)
    if (manifest.kind_image or manifest.kind_source is not None) and not manifest.kind_command:
        raise ConfigError("a driver image needs its command", file=file, field="kind.command",
                          fix="give the container's argv with the same placeholders as local.command, e.g. "
                              '[/driver, "--registry-dir={registry_dir}", ...]')
    if manifest.kind_image:
        archive = (manifest.folder / manifest.kind_image).resolve()
        if not archive.is_file():
            raise ConfigError(f"image archive {archive} does not exist", file=file, field="kind.image",
                              fix="give the path of an image archive relative to the manifest (docker save -o ...)")
        return KindDriverImage(archive_reference(archive, file), archive, manifest.kind_command, "vendor archive",
                               file_digest(archive))
    if manifest.kind_source is not None:
        from ..image import go_source

        built = go_source.build_image(manifest.kind_source, manifest.kind_main,
                                      repository=go_source.default_repository(manifest.name), file=file)
        return KindDriverImage(built.reference, built.archive, manifest.kind_command, "go build",
                               file_digest(built.archive))
    if manifest.command and manifest.command[0] == PYTHON:
        from ..image import python_driver

        built = python_driver.build_python_image(manifest)
        return KindDriverImage(built.reference, built.archive, manifest.command, "python image",
                               file_digest(built.archive), python=built.python, working_dir=built.working_dir,
                               env=tuple(sorted(built.env.items())))
    raise ConfigError(f"driver {manifest.name} has no image for kind", file=file, field="kind.image",
                      fix="save the driver's image (`docker save -o driver.tar <image>:<tag>`) and set kind.image to "
                          "that file and kind.command to its argv; or, for a Go module, set kind.source to its folder "
                          "(the harness builds it) and kind.command; Python drivers started with {python} get an "
                          "image built by the harness (docs/kind.md \"Your driver on kind\")")


@dataclass(frozen=True)
class MadeArchive:
    """What `cci-conformance driver image DIR` made: an archive for kind.image and the kind.command to go with it."""

    reference: str
    archive: Path
    digest: str  # sha256:<hex> of the archive file
    command: tuple[str, ...]
    image_path: str  # the archive as kind.image names it: relative to DIR when inside it
    seconds: float
    reused: bool
    dra: bool = False  # a dra/v1 driver: its archive goes in dra.image, its program in dra.program

    def manifest_section(self) -> str:
        """The ``kind:`` section of driver.yaml that runs this archive (in place of kind.source and kind.main), or
        for a dra/v1 driver the ``dra:`` keys (in place of dra.source and dra.main)."""
        if self.dra:
            return f"dra:\n  image: {json.dumps(self.image_path)}\n  program: {json.dumps(self.command[0])}\n"
        lines = ["kind:", f"  image: {json.dumps(self.image_path)}", "  command:"]
        return "\n".join(lines + [f"    - {json.dumps(arg)}" for arg in self.command]) + "\n"


def make_archive(folder: Path | str, out: Path | str | None = None, main: str | None = None) -> MadeArchive:
    """Build the Go driver in ``folder`` into a one-file image archive for kind.image: its manifest's kind.source
    (and kind.main), or ``folder`` itself when it holds a go.mod; written to ``out`` (default
    ``folder/<driver name>.oci.tar``). The command is the manifest's kind.command when it starts the built program,
    else that program with local.command's arguments."""
    from ..image import go_source

    folder = Path(folder)
    manifest_file = folder / MANIFEST_FILE
    manifest = load_manifest(folder) if manifest_file.is_file() else None
    if manifest is not None and manifest.kind_source is not None:
        source, package, file = manifest.kind_source, main or manifest.kind_main, str(manifest.path)
    elif manifest is not None and manifest.dra_source is not None:
        source, package, file = manifest.dra_source, main or manifest.dra_main, str(manifest.path)
    elif (folder / "go.mod").is_file():
        source, package, file = folder, main or ".", str(folder / "go.mod")
    else:
        raise ConfigError(f"{folder} holds no Go module to build", file=str(manifest_file), field="kind.source",
                          fix="pass the folder of the driver's go.mod, or set kind.source in its driver.yaml to that "
                              "folder; an image of your own: `docker save -o driver.tar IMAGE:TAG` and kind.image "
                              "(docs/kind.md \"Your driver on kind\")")
    repository = go_source.default_repository(manifest.name) if manifest else None
    built = go_source.build_image(source, package, repository=repository, file=file)
    program = "/" + built.binary.name
    if manifest is not None and manifest.kind_command[:1] == (program,):
        command = manifest.kind_command
    elif manifest is not None and manifest.command:
        command = (program, *manifest.command[1:])
    else:
        command = (program,)
    target = Path(out) if out else folder / f"{manifest.name if manifest else built.binary.name}.oci.tar"
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    shutil.copyfile(built.archive, partial)
    os.replace(partial, target)
    inside = target.resolve().is_relative_to(folder.resolve())
    image_path = target.resolve().relative_to(folder.resolve()).as_posix() if inside else str(target.resolve())
    return MadeArchive(archive_reference(target, str(target)), target.resolve(), file_digest(target), command,
                       image_path, built.seconds, built.reused, dra=manifest is not None and manifest.is_dra)
