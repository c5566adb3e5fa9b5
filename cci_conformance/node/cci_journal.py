"""The journal of ``cci_manager_state``: one CRC-checked line per change on top of the snapshot (spec S3.5)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ..crclines import split_lines
from .checkpoint import CCI_JOURNAL_FILE, CCI_STATE_FILE, decode, restore_error


def _int(value, what: str, path) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise restore_error(path, f"{what} is not an integer ({value!r})")
    return value


def _apply(record: dict, data: dict, containers: dict, pending: dict, path) -> None:
    for field, target in (("containers", containers), ("pending", pending)):
        changes = record.get(field, {})
        if not isinstance(changes, dict):
            raise restore_error(path, f"record {record.get('seq')}: {field} is not an object")
        for key, value in changes.items():
            if value is None:
                target.pop(key, None)
            elif isinstance(value, dict):
                target[key] = value
            else:
                raise restore_error(path, f"record {record.get('seq')}: {field}[{key!r}] is not an object or null")
    for field in ("generation", "cpuManagerState"):
        if field in record:
            data[field] = record[field]


def replay(snapshot: bytes | None, journal: bytes | None, snapshot_path: Path | str,
           journal_path: Path | str) -> dict | None:
    """The snapshot's Data with its journal applied (None: nothing saved); CheckpointError names the file
    and the fix.

    A journal record is applied when its ``epoch`` is the snapshot's ``journalEpoch`` and its ``seq``
    the next one. Records of an older epoch were written before the snapshot that superseded them (a
    node killed between writing a snapshot and emptying the journal) and are skipped. A last line
    without its newline is a write cut short and dropped: it was never acknowledged. Anything else (a
    whole line failing its CRC, a missing record, records newer than the snapshot) is damage.
    """
    lines = split_lines(journal or b"")
    if snapshot is None:
        if lines:
            raise restore_error(journal_path, f"the journal holds {len(lines)} record(s) but {CCI_STATE_FILE} "
                                              "is missing")
        return None
    data = decode(snapshot, snapshot_path)
    try:
        epoch = _int(data["journalEpoch"], "journalEpoch", snapshot_path)
        containers = {f"{r['podUID']}/{r['container']}": r for r in data["containers"]}
        pending = {str(_int(e["id"], "a pending entry's id", snapshot_path)): e for e in data["pending"]}
    except (KeyError, TypeError) as exc:
        raise restore_error(snapshot_path, f"unusable content (missing {exc})") from None
    seq = 0
    for number, (record, _, _) in enumerate(lines, 1):
        if record is None:
            raise restore_error(journal_path, f"line {number} is damaged (a whole line whose CRC-32 does not "
                                              "match, not a write cut short)")
        rec_epoch = _int(record.get("epoch"), f"line {number}: epoch", journal_path)
        if rec_epoch < epoch and not seq:
            continue  # superseded by the snapshot
        if rec_epoch != epoch:
            raise restore_error(journal_path, f"line {number} belongs to snapshot epoch {rec_epoch}, but "
                                              f"{CCI_STATE_FILE} is epoch {epoch}")
        if record.get("seq") != seq + 1:
            raise restore_error(journal_path, f"record {seq + 1} of epoch {epoch} is missing (line {number} is "
                                              f"record {record.get('seq')!r})")
        _apply(record, data, containers, pending, journal_path)
        seq += 1
    data["containers"] = [containers[k] for k in sorted(containers, key=lambda k: (containers[k]["podUID"],
                                                                                   containers[k]["container"]))]
    data["pending"] = [pending[k] for k in sorted(pending, key=int)]
    return data


def read_cci_state(files: Mapping[str, bytes]) -> dict:
    """The node's store as one Data object, from the raw ``cci_manager_state`` files ({} when none).

    For readers of a node's files (suites, evidence, tests): the same replay the node does at start.
    """
    return replay(files.get(CCI_STATE_FILE), files.get(CCI_JOURNAL_FILE), CCI_STATE_FILE, CCI_JOURNAL_FILE) or {}


class JournalWriter:
    """Appends records to the journal file; each is on disk (fdatasync) before ``append`` returns."""

    def __init__(self, path: Path | str):
        self.path = os.fspath(path)
        self.size = 0
        self._fd: int | None = None

    def _open(self) -> int:
        if self._fd is None:
            created = not os.path.exists(self.path)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            self.size = os.fstat(self._fd).st_size
            if created:  # the new name must survive a power loss too
                dfd = os.open(os.path.dirname(self.path) or ".", os.O_RDONLY)
                try:
                    os.fsync(dfd)
                finally:
                    os.close(dfd)
        return self._fd

    def append(self, line: bytes) -> None:
        fd = self._open()
        written = 0
        while written < len(line):
            written += os.pwrite(fd, line[written:], self.size + written)
        self.size += len(line)
        os.fdatasync(fd)

    def empty(self) -> None:
        """Cut the journal to nothing (a snapshot took its records in)."""
        fd = self._open()
        if self.size:
            os.ftruncate(fd, 0)
            self.size = 0
            os.fdatasync(fd)
