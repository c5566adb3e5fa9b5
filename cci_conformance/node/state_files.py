"""The node's two checkpoints: ``cci_manager_state`` (the store) and the kubelet's ``cpu_manager_state`` (derived)."""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..cpuset import CPUs
from ..crclines import encode_line
from .cci_journal import JournalWriter, replay
from .checkpoint import (
    API_VERSION,
    CCI_JOURNAL_FILE,
    CCI_STATE_FILE,
    CPU_STATE_FILE,
    KIND,
    CheckpointError,
    canonical,
    encode_parts,
    restore_error,
    write_atomic,
)
from .cpumanager import CPUManagerState, CPUManagerStateError, StateValidationError, StaticPolicy, dumps, loads
from .profile import NodeConfig
from .store import Record, Store

JOURNAL_MIN_BYTES = 64 * 1024

_DRAIN = "please drain this node and remove policy state file"


@dataclass
class Loaded:
    generation: int = 0
    pending: list[dict] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)


def _escape(text: str) -> str:
    return json.dumps(text)[1:-1]


_HEAD = ('{"apiVersion":' + json.dumps(API_VERSION) + ',"containers":[').encode()
_HEAD_ESCAPED = _escape(_HEAD.decode()).encode()


def _read(path: Path | str) -> bytes | None:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        return None


def _file_checksum(raw: bytes) -> int | None:
    try:
        value = json.loads(raw).get("checksum")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) else None


class StateFiles:
    """Writes the store as ``cci_manager_state`` then ``cpu_manager_state``; loads and cross-checks both."""

    def __init__(self, root: Path, config: NodeConfig, store: Store, static_policy: StaticPolicy | None = None):
        self.cci_path = Path(root) / CCI_STATE_FILE
        self.cpu_path = Path(root) / CPU_STATE_FILE
        self.config = config
        self.store = store
        self.static_policy = static_policy
        self._order: list[tuple[str, str]] = []  # container keys, sorted; _texts/_escaped are their fragments
        self._texts: list[str] = []
        self._escaped: list[str | None] = []  # None: not escaped yet
        self._cpu_key: tuple | None = None  # content of the cpu_manager_state on disk
        self._cpu_checksum: int | None = None
        self._cpu_version = -1  # store version the cpu_manager_state content was computed at
        self._containers: tuple[int, bytes, bytes] = (-1, b"", b"")  # store revision, fragments joined, escaped
        self._meta: tuple[tuple, str] = ((), "")
        self._fragments_ready = False
        # the journal (cci_journal.py): epoch of the snapshot on disk (None: none written by this process yet)
        self.journal = JournalWriter(Path(root) / CCI_JOURNAL_FILE)
        self._epoch: int | None = None
        self._loaded_epoch = 0
        self._seq = 0
        self._snapshot_bytes = 0
        self._next_id = 1  # of pending entries
        self._saved_current: int | None = None  # cpu_manager_state checksum the journal last recorded
        self._saved_generation: int | None = None
        self._saved_pending: dict[str, str] = {}
        # the constant pieces of Data around the container list, in sorted-key order
        self._tail_head = '],"cpuManagerState":'
        self._tail_mid = ',"kind":' + json.dumps(KIND) + ',"mode":' + json.dumps(config.mode) + ',"pending":'

    # ---- the cpu_manager_state view of the store (docs/spec.md S3.5) ----
    def cpu_state(self) -> CPUManagerState:
        if self.config.policy == "none":
            # the none policy never assigns anything: policyName "none", empty defaultCpuSet, no entries
            return CPUManagerState("none", frozenset(), {})
        entries: dict[str, dict[str, CPUs]] = {}
        for (pod, name), rec in self.store.records.items():
            if rec.held:
                entries.setdefault(pod, {})[name] = rec.held
        return CPUManagerState("static", self.store.shared_pool, entries)

    # ---- writing ----
    def save(self, generation: int, pending: list[dict], compact: bool = False) -> None:
        """Make the store, ``pending`` and ``generation`` durable: one journal record, or a new snapshot.

        The first save of a StateFiles (the node's start), ``compact`` and a journal grown past
        max(JOURNAL_MIN_BYTES, 2 x snapshot) write a snapshot; any other change appends one record,
        O(changed containers) whatever the store size (the admission time budget, spec S3.5).
        """
        cpu_bytes, cpu_key, current = self._cpu_change()
        dirty = self.store.take_dirty()
        snapshot = compact or self._epoch is None or \
            self.journal.size >= max(JOURNAL_MIN_BYTES, 2 * self._snapshot_bytes)
        changed = self._update_fragments(dirty if self._fragments_ready else dirty | set(self.store.records))
        self._fragments_ready = True
        texts: dict[str, str] = {}
        for entry in pending:  # a pending entry's id is its journal key; ids only grow
            if "id" not in entry:
                entry["id"] = self._next_id
                self._next_id += 1
            key = str(entry["id"])
            texts[key] = self._saved_pending.get(key) or canonical(entry)  # entries never change once written
        meta = (current, self._cpu_checksum)
        if snapshot:
            self._write_snapshot(generation, meta, texts)
        else:
            parts = [f'"epoch":{self._epoch}']
            if changed:
                parts.insert(0, '"containers":{' + ",".join(
                    f"{json.dumps(k)}:{changed[k] or 'null'}" for k in sorted(changed)) + "}")
            if current != self._saved_current:  # "previous" matters only until the new file is written
                parts.insert(-1, '"cpuManagerState":' + self._meta_text(meta))
            if generation != self._saved_generation:
                parts.append(f'"generation":{generation}')
            delta = {k: t for k, t in texts.items() if self._saved_pending.get(k) != t}
            delta.update({k: "null" for k in self._saved_pending if k not in texts})
            if delta:
                parts.append('"pending":{' + ",".join(f'"{k}":{delta[k]}' for k in sorted(delta)) + "}")
            if len(parts) > 1:  # something besides the epoch changed (keys in sorted order, as canonical())
                self._seq += 1
                self.journal.append(encode_line("{" + ",".join(parts) + f',"seq":{self._seq}' + "}"))
        self._saved_current, self._saved_generation, self._saved_pending = current, generation, texts
        if cpu_bytes is not None:
            write_atomic(self.cpu_path, cpu_bytes)
            self._cpu_key = cpu_key
            self._cpu_checksum = current

    def _cpu_change(self) -> tuple[bytes | None, tuple | None, int | None]:
        """The new cpu_manager_state bytes when its content changed (entries and pool follow the held set)."""
        if self._cpu_version == self.store.version:
            return None, None, self._cpu_checksum
        self._cpu_version = self.store.version
        state = self.cpu_state()
        key = (state.policy_name, state.default_cpuset, tuple(sorted(
            (p, c, cpus) for p, cs in state.entries.items() for c, cpus in cs.items())))
        if key == self._cpu_key:
            return None, None, self._cpu_checksum
        cpu_bytes = dumps(state)
        return cpu_bytes, key, _file_checksum(cpu_bytes)

    def _meta_text(self, meta: tuple) -> str:
        if self._meta[0] != meta:
            self._meta = (meta, canonical({"current": meta[0], "previous": meta[1]}))
        return self._meta[1]

    def _write_snapshot(self, generation: int, meta: tuple, pending: dict[str, str]) -> None:
        """All of the store in one atomic file (temp + fsync + rename), then the journal emptied."""
        if self._containers[0] != self.store.revision:
            escaped = self._escaped
            for i, text in enumerate(escaped):
                if text is None:
                    escaped[i] = _escape(self._texts[i])
            self._containers = (self.store.revision, ",".join(self._texts).encode(), ",".join(escaped).encode())
        epoch = (self._epoch if self._epoch is not None else self._loaded_epoch) + 1
        # sorted-key canonical JSON, assembled from cached per-container fragments (same bytes as canonical())
        tail = (self._tail_head + self._meta_text(meta) + ',"generation":' + str(generation)
                + ',"journalEpoch":' + str(epoch) + self._tail_mid
                + "[" + ",".join(pending[k] for k in sorted(pending, key=int)) + "]}")
        raw = encode_parts([_HEAD, self._containers[1], tail.encode()],
                           [_HEAD_ESCAPED, self._containers[2], _escape(tail).encode()])
        write_atomic(self.cci_path, raw)
        # a kill here leaves records of the old epoch in the journal: replay skips them (cci_journal.replay)
        self.journal.empty()
        self._epoch, self._seq, self._snapshot_bytes = epoch, 0, len(raw)

    def _update_fragments(self, keys: set) -> dict[str, str | None]:
        """Keep the per-container JSON fragments in key order, touching only the changed keys; returns
        "<podUID>/<container>" -> the new fragment (None: removed) for the journal."""
        changed: dict[str, str | None] = {}
        for k in keys:
            i = bisect.bisect_left(self._order, k)
            present = i < len(self._order) and self._order[i] == k
            rec = self.store.records.get(k)
            if rec is None:
                if present:
                    del self._order[i], self._texts[i], self._escaped[i]
                changed[f"{k[0]}/{k[1]}"] = None
                continue
            text = canonical(rec.to_json())
            changed[f"{k[0]}/{k[1]}"] = text
            if present:  # escaped when a snapshot needs it (most changes only go to the journal)
                self._texts[i], self._escaped[i] = text, None
            else:
                self._order.insert(i, k)
                self._texts.insert(i, text)
                self._escaped.insert(i, None)
        return changed

    # ---- loading ----
    def load(self) -> Loaded:
        out = Loaded()
        cpu_meta = {}
        data = replay(_read(self.cci_path), _read(self.journal.path), self.cci_path, self.journal.path)
        if data is not None:
            self._loaded_epoch = data["journalEpoch"]  # the next snapshot continues the epochs
            try:
                if data["mode"] != self.config.mode:
                    raise ValueError(f"configured mode {self.config.mode!r} differs from checkpoint mode "
                                     f"{data['mode']!r}")
                out.generation = int(data["generation"])
                out.pending = [dict(e) for e in data["pending"]]
                self._next_id = max([int(e["id"]) for e in out.pending], default=0) + 1
                out.records = [Record.from_json(r) for r in data["containers"]]
                cpu_meta = dict(data["cpuManagerState"])
            except (KeyError, TypeError, ValueError) as exc:
                raise self.cci_error(f"unusable content ({exc})") from None
        if self.cpu_path.exists():
            raw = self.cpu_path.read_bytes()
            try:
                state = loads(raw, path=self.cpu_path, policy_name=self.config.policy)
            except CPUManagerStateError as exc:
                raise CheckpointError(f"{exc} (delete {CCI_STATE_FILE} and {CCI_JOURNAL_FILE} too: they were "
                                      "written with that file)") from None
            if self.static_policy is not None:
                try:
                    self.static_policy.validate_state(state.copy(), self.store.online)
                except StateValidationError as exc:
                    raise CheckpointError(f"Static policy invalid state, {_DRAIN}: {exc} (file "
                                          f"{str(self.cpu_path)!r}; delete {CCI_STATE_FILE} and "
                                          f"{CCI_JOURNAL_FILE} too)") from None
            checksum = _file_checksum(raw)
            known = {cpu_meta.get("current"), cpu_meta.get("previous")} - {None}
            if checksum not in known and (state.entries or known):
                raise CheckpointError(
                    f"{CPU_STATE_FILE} (checksum {checksum}) is not the file {CCI_STATE_FILE} was written with "
                    f"(expected one of {sorted(known)}): the two files disagree; please drain this node and delete "
                    f"both {str(self.cpu_path)!r} and {str(self.cci_path)!r} (with its journal "
                    f"{self.journal.path!r}) before restarting the node")
            self._cpu_checksum = checksum
        return out

    def cci_error(self, problem: str) -> CheckpointError:
        return restore_error(self.cci_path, problem, also=self.cpu_path)
