"""Write single-layer OCI image archives from local files, so images need no registry and no docker build."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass
class ImageSpec:
    """One image: its full reference (``registry.k8s.io/etcd:3.6.5-0``), files and process defaults."""

    reference: str
    files: dict[str, Path] = field(default_factory=dict)  # path in image -> host file
    symlinks: dict[str, str] = field(default_factory=dict)  # path in image -> link target
    entrypoint: list[str] | None = None
    env: list[str] = field(default_factory=lambda: [f"PATH={DEFAULT_PATH}"])


def _add_dirs(tar: tarfile.TarFile, path: str, seen: set[str]) -> None:
    parts = path.strip("/").split("/")[:-1]
    for i in range(1, len(parts) + 1):
        directory = "/".join(parts[:i])
        if directory not in seen:
            seen.add(directory)
            info = tarfile.TarInfo(directory)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)


def layer_bytes(spec: ImageSpec) -> bytes:
    """A reproducible layer tar: fixed mtimes, root ownership, sorted entries, plus /tmp."""
    buffer = io.BytesIO()
    seen: set[str] = set()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tmp = tarfile.TarInfo("tmp")
        tmp.type, tmp.mode = tarfile.DIRTYPE, 0o1777
        tar.addfile(tmp)
        for inside in sorted(spec.files):
            _add_dirs(tar, inside, seen)
            source = spec.files[inside]
            info = tarfile.TarInfo(inside.lstrip("/"))
            info.size = source.stat().st_size
            info.mode = source.stat().st_mode & 0o7777
            with source.open("rb") as handle:
                tar.addfile(info, handle)
        for inside in sorted(spec.symlinks):
            _add_dirs(tar, inside, seen)
            info = tarfile.TarInfo(inside.lstrip("/"))
            info.type, info.linkname, info.mode = tarfile.SYMTYPE, spec.symlinks[inside], 0o777
            tar.addfile(info)
    return buffer.getvalue()


def _blob(tar: tarfile.TarFile, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
    return f"sha256:{digest}"


def write_archive(spec: ImageSpec, out: Path) -> Path:
    """Write an OCI image-layout tar that ``ctr images import`` names after ``spec.reference``."""
    layer = layer_bytes(spec)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": spec.env, **({"Entrypoint": spec.entrypoint} if spec.entrypoint else {})},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{hashlib.sha256(layer).hexdigest()}"]},
    }
    with tarfile.open(out, "w") as tar:
        layer_digest = _blob(tar, layer)
        config_bytes = json.dumps(config, sort_keys=True).encode()
        config_digest = _blob(tar, config_bytes)
        manifest = {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": {"mediaType": CONFIG_TYPE, "digest": config_digest, "size": len(config_bytes)},
            "layers": [{"mediaType": LAYER_TYPE, "digest": layer_digest, "size": len(layer)}],
        }
        manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
        manifest_digest = _blob(tar, manifest_bytes)
        tag = spec.reference.rsplit(":", 1)[1]
        index = {
            "schemaVersion": 2,
            "mediaType": INDEX_TYPE,
            "manifests": [{
                "mediaType": MANIFEST_TYPE,
                "digest": manifest_digest,
                "size": len(manifest_bytes),
                "platform": {"architecture": "amd64", "os": "linux"},
                # containerd names the imported image after this annotation.
                "annotations": {"io.containerd.image.name": spec.reference,
                                "org.opencontainers.image.ref.name": tag},
            }],
        }
        for name, data in (("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
                           ("index.json", json.dumps(index, sort_keys=True).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out
