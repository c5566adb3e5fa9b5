"""The node's two checkpoints: ``cci_manager_state`` (the store) and the kubelet's ``cpu_manager_state`` (derived)."""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..cpuset import CPUs
from .checkpoint import (
    API_VERSION,
    CCI_STATE_FILE,
    CPU_STATE_FILE,
    KIND,
    CheckpointError,
    canonical,
    decode,
    encode_parts,
    write_atomic,
)
from .cpumanager import CPUManagerState, CPUManagerStateError, StateValidationError, StaticPolicy, dumps, loads
from .profile import NodeConfig
from .store import Record, Store

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
        self._escaped: list[str] = []
        self._cpu_key: tuple | None = None  # content of the cpu_manager_state on disk
        self._cpu_checksum: int | None = None
        self._cpu_version = -1  # store version the cpu_manager_state content was computed at
        self._containers: tuple[int, bytes, bytes] = (-1, b"", b"")  # store revision, fragments joined, escaped
        self._meta: tuple[tuple, str] = ((), "")
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
    def save(self, generation: int, pending: list[dict]) -> None:
        cpu_bytes = None
        current = self._cpu_checksum
        if self._cpu_version != self.store.version:  # entries and pool change only with the held set
            state = self.cpu_state()
            key = (state.policy_name, state.default_cpuset, tuple(sorted(
                (p, c, cpus) for p, cs in state.entries.items() for c, cpus in cs.items())))
            if key != self._cpu_key:
                cpu_bytes = dumps(state)
                current = _file_checksum(cpu_bytes)
            self._cpu_version = self.store.version
        dirty = self.store.take_dirty()
        if dirty or self._containers[0] < 0:
            self._update_fragments(dirty if self._containers[0] >= 0 else set(self.store.records))
            self._containers = (self.store.revision, ",".join(self._texts).encode(), ",".join(self._escaped).encode())
        # sorted-key canonical JSON, assembled from cached per-container fragments (same bytes as canonical())
        meta = (current, self._cpu_checksum)
        if self._meta[0] != meta:
            self._meta = (meta, canonical({"current": current, "previous": self._cpu_checksum}))
        tail = (self._tail_head + self._meta[1] + ',"generation":' + str(generation) + self._tail_mid
                + canonical(pending) + "}")
        tail_b = tail.encode()
        write_atomic(self.cci_path, encode_parts([_HEAD, self._containers[1], tail_b],
                                                 [_HEAD_ESCAPED, self._containers[2], _escape(tail).encode()]))
        if cpu_bytes is not None:
            write_atomic(self.cpu_path, cpu_bytes)
            self._cpu_key = key
            self._cpu_checksum = current

    def _update_fragments(self, keys: set) -> None:
        """Keep the per-container JSON fragments in key order, touching only the changed keys."""
        for k in keys:
            i = bisect.bisect_left(self._order, k)
            present = i < len(self._order) and self._order[i] == k
            rec = self.store.records.get(k)
            if rec is None:
                if present:
                    del self._order[i], self._texts[i], self._escaped[i]
                continue
            text = canonical(rec.to_json())
            if present:
                self._texts[i], self._escaped[i] = text, _escape(text)
            else:
                self._order.insert(i, k)
                self._texts.insert(i, text)
                self._escaped.insert(i, _escape(text))

    # ---- loading ----
    def load(self) -> Loaded:
        out = Loaded()
        cpu_meta = {}
        if self.cci_path.exists():
            data = decode(self.cci_path.read_bytes(), self.cci_path)
            try:
                if data["mode"] != self.config.mode:
                    raise ValueError(f"configured mode {self.config.mode!r} differs from checkpoint mode "
                                     f"{data['mode']!r}")
                out.generation = int(data["generation"])
                out.pending = [dict(e) for e in data["pending"]]
                out.records = [Record.from_json(r) for r in data["containers"]]
                cpu_meta = dict(data["cpuManagerState"])
            except (KeyError, TypeError, ValueError) as exc:
                raise self.cci_error(f"unusable content ({exc})") from None
        if self.cpu_path.exists():
            raw = self.cpu_path.read_bytes()
            try:
                state = loads(raw, path=self.cpu_path, policy_name=self.config.policy)
            except CPUManagerStateError as exc:
                raise CheckpointError(f"{exc} (delete {CCI_STATE_FILE} too: it was written with that file)") from None
            if self.static_policy is not None:
                try:
                    self.static_policy.validate_state(state.copy(), self.store.online)
                except StateValidationError as exc:
                    raise CheckpointError(f"Static policy invalid state, {_DRAIN}: {exc} (file "
                                          f"{str(self.cpu_path)!r}; delete {CCI_STATE_FILE} too)") from None
            checksum = _file_checksum(raw)
            known = {cpu_meta.get("current"), cpu_meta.get("previous")} - {None}
            if checksum not in known and (state.entries or known):
                raise CheckpointError(
                    f"{CPU_STATE_FILE} (checksum {checksum}) is not the file {CCI_STATE_FILE} was written with "
                    f"(expected one of {sorted(known)}): the two files disagree; please drain this node and delete "
                    f"both {str(self.cpu_path)!r} and {str(self.cci_path)!r} before restarting the node")
            self._cpu_checksum = checksum
        return out

    def cci_error(self, problem: str) -> CheckpointError:
        return CheckpointError(
            f"could not restore state from checkpoint: {problem}, please drain this node and delete the CCI manager "
            f"checkpoint file {str(self.cci_path)!r} (and {str(self.cpu_path)!r}) before restarting the node")
