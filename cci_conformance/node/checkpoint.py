"""Atomic file writes and the ``cci_manager_state`` format (Data + CRC-32 Checksum, as dra_manager_state)."""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

CCI_STATE_FILE = "cci_manager_state"
CCI_JOURNAL_FILE = "cci_manager_state.journal"
CPU_STATE_FILE = "cpu_manager_state"
KIND = "CCICheckpoint"
API_VERSION = "checkpoint.cci.cci-conformance.io/v1"


class CheckpointError(Exception):
    """A state file that is corrupt or does not match the node; the message says which file to delete and why."""


def write_atomic(path: Path | str, data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to ``path`` so that a reader (or a restart after SIGKILL) sees the old or the new bytes.

    Temp file + fsync + rename + directory fsync, as the kubelet's FileStore does for checkpoints;
    ``durable=False`` skips the fsyncs (the runtime's cpuset files stand for cgroupfs, which is not
    durable either).
    """
    path = os.fspath(path)
    parent, name = os.path.split(path)
    tmp = f"{parent}/.{name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, path)
    if durable:
        dfd = os.open(parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def crc32(text: str) -> int:
    """CRC-32/IEEE of the UTF-8 bytes of ``text`` (the dra_manager_state checksum)."""
    return zlib.crc32(text.encode()) & 0xFFFFFFFF


def canonical(value) -> str:
    """Canonical JSON: sorted keys, no spaces, ASCII only."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def encode(data_text: str) -> bytes:
    """The file bytes for a canonical Data text: ``{"Data":"<text>","Checksum":<crc32 of text>}``."""
    return encode_parts([data_text.encode()], [json.dumps(data_text)[1:-1].encode()])


def encode_parts(parts: list[bytes], escaped: list[bytes]) -> bytes:
    """``encode`` of the concatenated ``parts`` (UTF-8), given each part already escaped as a JSON string body.

    Escaping is per character, so escaped parts concatenate and the CRC runs on; callers cache the
    big, rarely changing part (the container list), which is most of the cost of a write.
    """
    crc = 0
    for part in parts:
        crc = zlib.crc32(part, crc)
    return b'{"Data":"' + b"".join(escaped) + b'","Checksum":' + str(crc & 0xFFFFFFFF).encode() + b"}"


def restore_error(path: Path | str, problem: str, also: Path | str | None = None) -> CheckpointError:
    """The kubelet's CPU manager restore-failure advice (policy_static.go), for ``cci_manager_state`` + journal
    (and ``also``, a file written with them that must go too)."""
    snapshot = os.path.join(os.path.dirname(path), CCI_STATE_FILE)
    journal = os.path.join(os.path.dirname(path), CCI_JOURNAL_FILE)
    extra = f" (and {str(also)!r})" if also is not None else ""
    return CheckpointError(
        f"could not restore state from checkpoint: {os.path.basename(path)}: {problem}, please drain this node "
        f"and delete the CCI manager checkpoint file {snapshot!r} and its journal {journal!r}{extra} before "
        "restarting the node (the CCI drivers keep their own state: remove their grants too, e.g. by restarting "
        "them with an empty state directory)")


def decode(raw: bytes, path: Path) -> dict:
    """Verify and parse a ``cci_manager_state`` file; CheckpointError names the file and what to do."""
    try:
        outer = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise restore_error(path, f"not JSON ({exc})") from None
    if not isinstance(outer, dict) or set(outer) != {"Data", "Checksum"} or not isinstance(outer["Data"], str) \
            or not isinstance(outer["Checksum"], int) or isinstance(outer["Checksum"], bool):
        raise restore_error(path, 'not a {"Data": string, "Checksum": number} object')
    if crc32(outer["Data"]) != outer["Checksum"]:
        raise restore_error(path, "checkpoint is corrupted (checksum mismatch)")
    try:
        data = json.loads(outer["Data"])
    except ValueError as exc:
        raise restore_error(path, f"Data is not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("kind") != KIND or data.get("apiVersion") != API_VERSION:
        raise restore_error(path, f"Data is not a {KIND} of {API_VERSION}")
    return data
