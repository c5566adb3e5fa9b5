"""The driver's checkpoint: checksummed JSON in two alternating slot files, so every write is atomic and cheap.

Why two slots instead of temp-file + fsync + rename: on ext4 a rename over an existing file forces a data
flush (auto_da_alloc) and fsync costs milliseconds, which alone would break the admission latency budget.
Each change overwrites the *older* slot in place (never truncating, so no flush is forced) with a higher
sequence number; a crash mid-write can only tear that slot, and loading picks the valid slot with the
highest sequence number. A background thread fdatasyncs the slots within SYNC_BATCH_S of a write (power loss).
"""

from __future__ import annotations

import json
import os
import threading
import zlib
from pathlib import Path
from typing import Any

STATE_FILE = "driver_state.json"
SECOND_SLOT = "driver_state.1.json"
FORMAT_VERSION = 2
SYNC_BATCH_S = 0.05


class StateError(RuntimeError):
    """The checkpoint exists but cannot be trusted (altered, wrong version, or no whole slot)."""


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _checksum(canonical: str) -> str:
    # Integrity against torn or altered files, not an adversary: CRC-32 is enough and 10x cheaper than SHA-256.
    return f"crc32:{zlib.crc32(canonical.encode()):08x}"


class StateStore:
    """Load and save one JSON document under ``state_dir`` (files ``driver_state.json``, ``driver_state.1.json``)."""

    def __init__(self, state_dir: Path | str, background_sync: bool = True):
        self.dir = Path(state_dir)
        self.slots = (self.dir / STATE_FILE, self.dir / SECOND_SLOT)
        self.seq = 0
        self._sizes = [0, 0]
        self._fds: list[int | None] = [None, None]
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
        """The slot holding the newest state (the first slot when nothing was saved yet)."""
        return self.slots[self.seq % 2] if self.seq else self.slots[0]

    # ---- reading ----
    def _read_slot(self, path: Path) -> tuple[int, Any] | str | None:
        """(seq, data) for a whole slot; None when absent; a reason string when torn; StateError when altered."""
        try:
            raw = path.read_text()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StateError(f"cannot read {path}: {exc}") from None
        fix = f"restore it from a backup, or delete {self.dir}/driver_state*.json and remove every container the " \
              "driver served"
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            return f"{path} is not valid JSON ({exc})"  # a torn write, or damage: the caller decides
        if not isinstance(doc, dict) or {"version", "seq", "data", "checksum"} - set(doc):
            raise StateError(f"{path} lacks version/seq/data/checksum; {fix}")
        if doc["version"] != FORMAT_VERSION:
            raise StateError(f"{path} has format version {doc['version']!r}, expected {FORMAT_VERSION}; {fix}")
        if doc["checksum"] != _checksum(_canonical(doc["data"])):
            # A whole JSON document with a wrong checksum was altered after it was written: refuse.
            raise StateError(f"{path} checksum mismatch (the file was altered); {fix}")
        return int(doc["seq"]), doc["data"]

    def load(self) -> Any | None:
        """The newest saved data, or None when nothing was saved; StateError when it cannot be trusted."""
        results = [self._read_slot(p) for p in self.slots]
        whole = [(r, i) for i, r in enumerate(results) if isinstance(r, tuple)]
        torn = [r for r in results if isinstance(r, str)]
        if not whole:
            if torn:
                raise StateError(f"no whole checkpoint: {'; '.join(torn)}; delete {self.dir}/driver_state*.json "
                                 "and remove every container the driver served")
            self._loaded = True
            return None
        # A torn slot beside a whole one is a write that never completed: its change was never
        # acknowledged, so the whole slot holds the right state.
        (seq, data), _ = max(whole, key=lambda w: w[0][0])
        self._loaded = True
        self.seq = seq
        for i, p in enumerate(self.slots):
            try:
                self._sizes[i] = p.stat().st_size
            except FileNotFoundError:
                self._sizes[i] = 0
        return data

    # ---- writing ----
    def save(self, data: Any) -> None:
        """Write ``data`` into the older slot; when this returns, a crash of the process cannot lose it."""
        self.save_canonical(_canonical(data))

    def save_canonical(self, canonical: str) -> None:
        """:meth:`save` for data already encoded as canonical JSON (sorted keys, no spaces)."""
        if not self._loaded:  # continue the sequence of slots left by an earlier run
            self.load()
        seq = self.seq + 1
        text = f'{{"checksum":"{_checksum(canonical)}","data":{canonical},"seq":{seq},"version":{FORMAT_VERSION}}}'
        slot = seq % 2
        payload = text.encode()
        # Pad with spaces (valid JSON whitespace) instead of truncating: truncation forces a flush on ext4.
        if len(payload) < self._sizes[slot]:
            payload += b" " * (self._sizes[slot] - len(payload))
        fd = self._fd(slot)
        written = 0
        while written < len(payload):
            written += os.pwrite(fd, payload[written:], written)
        self._sizes[slot] = max(self._sizes[slot], len(payload))
        self.seq = seq
        self._dirty.set()

    def _fd(self, slot: int) -> int:
        fd = self._fds[slot]
        if fd is None:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.slots[slot], os.O_RDWR | os.O_CREAT, 0o600)
            self._fds[slot] = fd
        return fd

    def _sync_loop(self) -> None:
        while not self._closed:
            self._dirty.wait()
            # Batch: one fdatasync per SYNC_BATCH_S window, not one per change, so the sync thread does not
            # compete with admissions for the CPU on every call (power-loss window: about SYNC_BATCH_S).
            self._closing.wait(SYNC_BATCH_S)
            self._dirty.clear()
            self.sync()

    def sync(self) -> None:
        """fdatasync both slots and the directory (power-loss durability; not needed against crashes)."""
        for fd in list(self._fds):
            if fd is not None:
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
        for i, fd in enumerate(self._fds):
            if fd is not None:
                os.close(fd)
                self._fds[i] = None
