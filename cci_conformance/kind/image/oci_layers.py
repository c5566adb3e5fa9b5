"""Write multi-layer image archives from gzipped layer files, loadable by containerd and by docker alike."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path

from .oci_archive import CONFIG_TYPE, DEFAULT_PATH, INDEX_TYPE, MANIFEST_TYPE

# This module is separate from image/oci_archive.py on purpose: the node image's containerd-store step is keyed
# by image/oci_archive.py's text, so editing it would rebuild every node image.
GZIP_LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Layer:
    """One gzipped layer tar on disk; ``diff_id`` is the digest of the uncompressed tar (image config)."""

    path: Path
    digest: str
    diff_id: str
    size: int
    uncompressed_size: int

    def facts(self) -> dict:
        return {"digest": self.digest, "diff_id": self.diff_id, "size": self.size,
                "uncompressed_size": self.uncompressed_size}

    @classmethod
    def from_facts(cls, path: Path, facts: dict) -> Layer:
        return cls(path, facts["digest"], facts["diff_id"], facts["size"], facts["uncompressed_size"])


def gzip_layer(tar_path: Path, out: Path) -> Layer:
    """Compress an uncompressed layer tar reproducibly (no name, mtime 0), hashing both forms in one pass."""
    plain = hashlib.sha256()
    plain_size = 0
    with tar_path.open("rb") as source, out.open("wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as packed:
            while chunk := source.read(_CHUNK):
                plain.update(chunk)
                plain_size += len(chunk)
                packed.write(chunk)
    return Layer(out, f"sha256:{_file_sha256(out)}", f"sha256:{plain.hexdigest()}", out.stat().st_size, plain_size)


def gzip_layer_bytes(data: bytes, out: Path) -> Layer:
    out.write_bytes(gzip.compress(data, compresslevel=6, mtime=0))
    return Layer(out, f"sha256:{_file_sha256(out)}", f"sha256:{hashlib.sha256(data).hexdigest()}",
                 out.stat().st_size, len(data))


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _blob_bytes(tar: tarfile.TarFile, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    _add_bytes(tar, f"blobs/sha256/{digest}", data)
    return f"sha256:{digest}"


def image_config(layers: list[Layer], *, env: dict[str, str], working_dir: str, cmd: list[str]) -> dict:
    merged = {"PATH": DEFAULT_PATH, **env}
    return {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": [f"{k}={v}" for k, v in merged.items()], "WorkingDir": working_dir, "Cmd": cmd},
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
    }


def write_image(reference: str, layers: list[Layer], config: dict, out: Path) -> Path:
    """Write ``out``: an OCI image layout (what ``ctr images import`` and ``kind load image-archive`` read)
    plus docker's ``manifest.json`` naming the same blobs (``docker load`` before Docker 25 reads only that)."""
    with tarfile.open(out, "w") as tar:
        for layer in layers:
            info = tarfile.TarInfo(f"blobs/sha256/{layer.digest.split(':', 1)[1]}")
            info.size = layer.size
            with layer.path.open("rb") as handle:
                tar.addfile(info, handle)
        config_bytes = json.dumps(config, sort_keys=True).encode()
        config_digest = _blob_bytes(tar, config_bytes)
        manifest = {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": {"mediaType": CONFIG_TYPE, "digest": config_digest, "size": len(config_bytes)},
            "layers": [{"mediaType": GZIP_LAYER_TYPE, "digest": layer.digest, "size": layer.size}
                       for layer in layers],
        }
        manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
        manifest_digest = _blob_bytes(tar, manifest_bytes)
        index = {
            "schemaVersion": 2,
            "mediaType": INDEX_TYPE,
            "manifests": [{
                "mediaType": MANIFEST_TYPE, "digest": manifest_digest, "size": len(manifest_bytes),
                "platform": {"architecture": "amd64", "os": "linux"},
                # containerd names the imported image after this annotation.
                "annotations": {"io.containerd.image.name": reference,
                                "org.opencontainers.image.ref.name": reference.rsplit(":", 1)[1]},
            }],
        }
        docker = [{"Config": f"blobs/sha256/{config_digest.split(':', 1)[1]}", "RepoTags": [reference],
                   "Layers": [f"blobs/sha256/{layer.digest.split(':', 1)[1]}" for layer in layers]}]
        _add_bytes(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        _add_bytes(tar, "index.json", json.dumps(index, sort_keys=True).encode())
        _add_bytes(tar, "manifest.json", json.dumps(docker, sort_keys=True).encode())
    return out
