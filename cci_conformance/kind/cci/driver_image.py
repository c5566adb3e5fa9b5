"""Which image runs a CCI driver on kind, with which command: the Go reference's, a Python driver's or the vendor's."""

from __future__ import annotations

import hashlib
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path

from ...drivers.manifest import DriverManifest
from ...errors import ConfigError
from ...paths import PROJECT_ROOT

GO_REFERENCE = PROJECT_ROOT / "drivers_under_test" / "go-reference"
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


def archive_reference(archive: Path, manifest_file: str) -> str:
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
                          field="kind.image",
                          fix="write it with `docker save -o driver.tar <image>:<tag>` (or an OCI layout tar)"
                          ) from None
    raise ConfigError(f"{archive} names no tagged image", file=manifest_file, field="kind.image",
                      fix="save a tagged image: `docker save -o driver.tar <image>:<tag>`")


def for_manifest(manifest: DriverManifest) -> KindDriverImage:
    """The image that runs ``manifest``'s driver on kind (built offline and cached, or the vendor's archive)."""
    file = str(manifest.path)
    if manifest.kind_image:
        archive = (manifest.folder / manifest.kind_image).resolve()
        if not archive.is_file():
            raise ConfigError(f"image archive {archive} does not exist", file=file, field="kind.image",
                              fix="give the path of an image archive relative to the manifest (docker save -o ...)")
        if not manifest.kind_command:
            raise ConfigError("a driver image needs its command", file=file, field="kind.command",
                              fix="give the container's argv with the same placeholders as local.command, e.g. "
                                  '[/driver, "--registry-dir={registry_dir}", ...]')
        return KindDriverImage(archive_reference(archive, file), archive, manifest.kind_command, "vendor archive",
                               file_digest(archive))
    if manifest.folder.resolve() == GO_REFERENCE.resolve():
        from ..image import go_driver

        built = go_driver.build_image()
        return KindDriverImage(built.reference, built.archive, (f"/{go_driver.BINARY}", *manifest.command[1:]),
                               "go build", file_digest(built.archive))
    if manifest.command and manifest.command[0] == PYTHON:
        from ..image import python_driver

        built = python_driver.build_python_image(manifest)
        return KindDriverImage(built.reference, built.archive, manifest.command, "python image",
                               file_digest(built.archive), python=built.python, working_dir=built.working_dir,
                               env=tuple(sorted(built.env.items())))
    raise ConfigError(f"driver {manifest.name} has no image for kind", file=file, field="kind.image",
                      fix="save the driver's image (`docker save -o driver.tar <image>:<tag>`) and set kind.image to "
                          "that file and kind.command to its argv (docs/kind.md \"Your driver on kind\"); Python "
                          "drivers started with {python} get an image built by the harness")
