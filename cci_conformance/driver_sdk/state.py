"""The driver's checkpoint: a CRC-protected journal of changes over snapshots in two alternating slot files.

Format (version 3). The state is an ordered mapping of string keys to JSON values. Every line below is
``<crc32 as 8 hex digits> <JSON>\\n``, the CRC-32 taken over the UTF-8 bytes of the JSON text.
- Snapshot slots ``driver_state.json`` (even generations) and ``driver_state.1.json`` (odd ones): one line
  ``{"data":{key:value,...},"seq":G,"version":3}``, padded with spaces. Generation 0 is the empty state and
  has no file.
- Journals ``driver_state.journal`` and ``driver_state.1.journal``, paired with the slot of the same parity:
  one line per change on top of snapshot G, ``{"del":[key,...],"gen":G,"seq":N,"set":{key:value,...}}``,
  N counting 1, 2, ... from the start of the file. A journal is emptied when its slot receives a new snapshot.

Why: a change costs one short record (O(1) in the number of live admissions) instead of rewriting the whole
state. A change is acknowledged only after its record is written. When the journal outgrows twice the
snapshot (and JOURNAL_MIN_BYTES), the state is compacted into the *older* slot as generation G+1 (padded, not
truncated, and nothing is renamed: on ext4 either forces a data flush) and later records go to that slot's
journal, emptied first. fsync costs milliseconds, so durability against power loss is left to a background
thread that fdatasyncs within SYNC_BATCH_S of a write. Crash safety (kill -9 at any byte): a torn last
record fails its CRC and is dropped (it was never acknowledged); a torn compaction leaves the older slot and
its journal whole (the change that triggered it is already journaled). Damage a crash cannot explain is
refused: a whole record of the expected number with a wrong CRC, a bad record followed by a good one, or a
bad slot whose journal already holds records of a newer generation than the newest whole slot.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from ..crclines import encode_line, parse_line, split_lines, unchecked

STATE_FILE = "driver_state.json"
SECOND_SLOT = "driver_state.1.json"
JOURNAL_FILES = ("driver_state.journal", "driver_state.1.journal")
FORMAT_VERSION = 3
JOURNAL_MIN_BYTES = 256 * 1024
SYNC_BATCH_S = 0.05


class StateError(RuntimeError):
    """The checkpoint exists but cannot be trusted (altered, wrong version, or a record missing mid-journal)."""


def _whole_but_altered(line: str, gen: int, seq: int) -> bool:
    """A complete, parseable record of the expected generation and number whose CRC fails: damage, not a
    tear (a write cut short leaves no newline, or a prefix of it followed by other bytes)."""
    doc = unchecked(line)
    return doc is not None and doc.get("gen") == gen and doc.get("seq") == seq and set(doc) == {
        "del", "gen", "seq", "set"}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class StateStore:
    """A keyed state under ``state_dir``: :meth:`load` it once, then :meth:`apply` each change."""

    def __init__(self, state_dir: Path | str, background_sync: bool = True,
                 journal_min_bytes: int = JOURNAL_MIN_BYTES):
        self.dir = Path(state_dir)
        self.slots = (self.dir / STATE_FILE, self.dir / SECOND_SLOT)
        self.journals = tuple(self.dir / name for name in JOURNAL_FILES)
        self.journal_min_bytes = journal_min_bytes
        self.seq = 0  # generation of the newest snapshot
        self.entries: dict[str, str] = {}  # key -> canonical JSON text of its value
        self._record_seq = 0
        self._offset = 0  # where the next record of this generation goes in its journal
        self._snapshot_bytes = 0
        self._slot_sizes = [0, 0]
        self._fds: dict[Path, int] = {}
        self._lock = threading.Lock()
        self._dirty = threading.Event()
        self._closing = threading.Event()
        self._loaded = False
        self._closed = False
        self._sync_thread = None
        if background_sync:
            self._sync_thread = threading.Thread(target=self._sync_loop, name="state-sync", daemon=True)
            self._sync_thread.start()

    @property
    def path(self) -> Path:
        """The slot of the newest snapshot (the first slot while there is none)."""
        return self.slots[self.seq % 2]

    def _fix(self) -> str:
        return (f"restore it from a backup, or delete {self.dir}/driver_state* and remove every container the "
                "driver served")

    # ---- reading ----
    def _read(self, path: Path) -> str | None:
        try:
            return path.read_bytes().decode("utf-8", errors="replace")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StateError(f"cannot read {path}: {exc}") from None

    def _read_slot(self, path: Path) -> tuple[int, dict[str, Any]] | str | None:
        """(generation, data) for a whole slot; None when absent; a reason string when torn or damaged."""
        raw = self._read(path)
        if raw is None:
            return None
        first, newline, _ = raw.partition("\n")
        doc = parse_line(first) if newline else None
        if doc is None:
            try:  # a whole document of another format version: refuse rather than start empty
                old = json.loads(raw)
            except ValueError:
                old = None
            if isinstance(old, dict) and "version" in old:
                raise StateError(f"{path} has format version {old['version']!r}, expected {FORMAT_VERSION}; "
                                 f"{self._fix()}")
            return f"{path} is torn or damaged (no whole line with a matching CRC-32)"
        if doc.get("version") != FORMAT_VERSION:
            raise StateError(f"{path} has format version {doc.get('version')!r}, expected {FORMAT_VERSION}; "
                             f"{self._fix()}")
        if not isinstance(doc.get("seq"), int) or not isinstance(doc.get("data"), dict):
            raise StateError(f"{path} lacks seq/data; {self._fix()}")
        return doc["seq"], doc["data"]

    def _records(self, path: Path) -> list[tuple[dict[str, Any] | None, int, str]]:
        """Each line of a journal as (record or None when torn/damaged, byte offset after it, its text)."""
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StateError(f"cannot read {path}: {exc}") from None
        return split_lines(raw)

    def load(self) -> dict[str, Any] | None:
        """The saved state (None when nothing was saved); StateError when it cannot be trusted."""
        with self._lock:
            return self._load()

    def _load(self) -> dict[str, Any] | None:
        slots = [self._read_slot(p) for p in self.slots]
        whole = [s for s in slots if isinstance(s, tuple)]
        gen, data = max(whole, key=lambda s: s[0]) if whole else (0, {})
        journals = [self._records(p) for p in self.journals]
        # A journal starts with records of the newest generation of its parity that saw a change, and that
        # generation's snapshot was complete before them: a newer head means a snapshot was lost or damaged.
        for i, records in enumerate(journals):
            head = records[0][0] if records else None
            if head is not None and isinstance(head.get("gen"), int) and head["gen"] > gen:
                why = slots[i] if isinstance(slots[i], str) else f"{self.slots[i]} is missing or older"
                raise StateError(f"{self.journals[i]} holds changes to snapshot {head['gen']} but {why}; "
                                 f"{self._fix()}")
        entries = {key: _canonical(value) for key, value in data.items()}
        seq, offset = 0, 0
        records = journals[gen % 2]
        stop = len(records)
        for i, (rec, end, _) in enumerate(records):
            if rec is None or rec.get("gen") != gen:
                stop = i
                break  # the torn tail, or stale bytes of an older generation
            if rec.get("seq") != seq + 1:
                raise StateError(f"{self.journals[gen % 2]} record {seq + 1} of snapshot {gen} is missing "
                                 f"(found {rec.get('seq')!r}); {self._fix()}")
            for key in rec.get("del", []):
                entries.pop(key, None)
            for key, value in rec.get("set", {}).items():
                entries[key] = _canonical(value)
            seq, offset = seq + 1, end
        if stop < len(records) and _whole_but_altered(records[stop][2], gen, seq + 1):
            raise StateError(f"{self.journals[gen % 2]} record {seq + 1} of snapshot {gen} was altered (a whole "
                             f"record whose CRC-32 does not match, not a torn write); {self._fix()}")
        for rec, _, _ in records[stop + 1:]:
            if rec is not None and rec.get("gen") == gen and isinstance(rec.get("seq"), int) and rec["seq"] > seq:
                raise StateError(f"{self.journals[gen % 2]} record {seq + 1} of snapshot {gen} is damaged but "
                                 f"later records are whole (not a crash); {self._fix()}")
        self.seq, self.entries, self._record_seq, self._offset = gen, entries, seq, offset
        self._snapshot_bytes = sum(len(k) + len(v) for k, v in entries.items())
        self._slot_sizes = [p.stat().st_size if p.exists() else 0 for p in self.slots]
        self._loaded = True
        if not whole and not any(journals):
            return None
        return {key: json.loads(text) for key, text in entries.items()}

    # ---- writing ----
    def apply(self, put: dict[str, str], deleted: list[str] = ()) -> None:
        """Record one change (``put``: key -> canonical JSON text; ``deleted``: keys); when this returns, a
        crash of the process cannot lose it."""
        with self._lock:
            if not self._loaded:  # continue the generations left by an earlier run
                self._load()
            seq = self._record_seq + 1
            body = ",".join(f"{json.dumps(k)}:{v}" for k, v in put.items())
            text = f'{{"del":{json.dumps(list(deleted))},"gen":{self.seq},"seq":{seq},"set":{{{body}}}}}'
            payload = encode_line(text)
            self._pwrite(self.journals[self.seq % 2], payload, self._offset)
            self._offset += len(payload)
            self._record_seq = seq
            for key in deleted:
                self.entries.pop(key, None)
            self.entries.update(put)
            if self._offset >= max(self.journal_min_bytes, 2 * self._snapshot_bytes):
                try:
                    self._compact()
                except OSError:
                    pass  # the change is already in the journal; compaction is retried on the next change
            self._dirty.set()

    def save(self, data: dict[str, Any]) -> None:
        """Replace the whole state with ``data`` (a mapping of string keys to JSON values)."""
        with self._lock:
            if not self._loaded:
                self._load()
            self.entries = {str(k): _canonical(v) for k, v in data.items()}
            self._compact()
            self._dirty.set()

    def _compact(self) -> None:
        gen = self.seq + 1
        body = ",".join(f"{json.dumps(k)}:{v}" for k, v in self.entries.items())
        payload = encode_line(f'{{"data":{{{body}}},"seq":{gen},"version":{FORMAT_VERSION}}}')
        slot = gen % 2
        # Pad with spaces instead of truncating: truncation forces a flush on ext4.
        padded = payload + b" " * max(0, self._slot_sizes[slot] - len(payload))
        self._pwrite(self.slots[slot], padded, 0)
        self._slot_sizes[slot] = max(self._slot_sizes[slot], len(payload))
        # Empty the journal of the new generation (it holds generation gen-2, now superseded): a record torn
        # over stale bytes could otherwise mix with them into a whole-looking line.
        if self.journals[slot].exists():
            self._truncate(self.journals[slot])
        self.seq, self._record_seq, self._offset = gen, 0, 0
        self._snapshot_bytes = len(payload)

    def _open(self, path: Path) -> int:
        fd = self._fds.get(path)
        if fd is None:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd = self._fds[path] = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        return fd

    def _truncate(self, path: Path) -> None:
        os.ftruncate(self._open(path), 0)

    def _pwrite(self, path: Path, payload: bytes, offset: int) -> None:
        fd = self._open(path)
        written = 0
        while written < len(payload):
            written += os.pwrite(fd, payload[written:], offset + written)

    def _sync_loop(self) -> None:
        while not self._closed:
            self._dirty.wait()
            # Batch: one fdatasync per SYNC_BATCH_S window, not one per change, so the sync thread does not
            # compete with admissions for the CPU on every call (power-loss window: about SYNC_BATCH_S).
            self._closing.wait(SYNC_BATCH_S)
            self._dirty.clear()
            self.sync()

    def sync(self) -> None:
        """fdatasync every file and the directory (power-loss durability; not needed against crashes)."""
        for fd in list(self._fds.values()):
            try:
                os.fdatasync(fd)
            except OSError:
                pass
        try:
            dir_fd = os.open(self.dir, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def close(self) -> None:
        self._closed = True
        self._closing.set()
        self._dirty.set()
        if self._sync_thread is not None:
            self._sync_thread.join(timeout=5)
        self.sync()
        for path, fd in list(self._fds.items()):
            os.close(fd)
            del self._fds[path]
