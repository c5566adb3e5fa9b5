"""The node's two checkpoints: ``cci_manager_state`` (the store) and the kubelet's ``cpu_manager_state`` (derived)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..cpuset import CPUs, format_cpulist
from .checkpoint import (
    API_VERSION,
    CCI_STATE_FILE,
    CPU_STATE_FILE,
    KIND,
    CheckpointError,
    canonical,
    decode,
    encode,
    write_atomic,
)
from .cpumanager.state import CPUManagerState, CPUManagerStateError, dumps, loads
from .profile import NodeConfig
from .store import Record, Store

_DRAIN = "please drain this node and remove policy state file"


@dataclass
class Loaded:
    generation: int = 0
    pending: list[dict] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)


def _file_checksum(raw: bytes) -> int | None:
    try:
        value = json.loads(raw).get("checksum")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) else None


def validate_static_state(state: CPUManagerState, online: CPUs, reserved: CPUs, strict: bool) -> str:
    """The kubelet's static-policy ``validateState`` (policy_static.go): "" if valid, else its error text."""
    default = state.default_cpuset
    if not default:
        return "default cpuset cannot be empty" if state.entries else ""
    if strict and default & reserved:
        return (f'some of strictly reserved cpus: "{format_cpulist(reserved & default)}" are present in '
                f'defaultCpuSet: "{format_cpulist(default)}"')
    if not strict and not reserved <= default:
        return (f'not all reserved cpus: "{format_cpulist(reserved)}" are present in defaultCpuSet: '
                f'"{format_cpulist(default)}"')
    known = set(default)
    for pod, containers in state.entries.items():
        for name, cpus in containers.items():
            if cpus & default:
                return (f'pod: {pod}, container: {name} cpuset: "{format_cpulist(cpus)}" overlaps with default '
                        f'cpuset "{format_cpulist(default)}"')
            known |= cpus
    if strict:
        known |= reserved
    if frozenset(known) != online:
        return (f'current set of available CPUs "{format_cpulist(online)}" doesn\'t match with CPUs in state '
                f'"{format_cpulist(known)}"')
    return ""


class StateFiles:
    """Writes the store as ``cci_manager_state`` then ``cpu_manager_state``; loads and cross-checks both."""

    def __init__(self, root: Path, config: NodeConfig, store: Store):
        self.cci_path = Path(root) / CCI_STATE_FILE
        self.cpu_path = Path(root) / CPU_STATE_FILE
        self.config = config
        self.store = store
        self._fragments: dict[tuple[str, str], tuple[Record, str]] = {}
        self._cpu_key: tuple | None = None  # content of the cpu_manager_state on disk
        self._cpu_checksum: int | None = None

    # ---- the cpu_manager_state view of the store (docs/spec.md §3.3) ----
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
        state = self.cpu_state()
        key = (state.policy_name, state.default_cpuset, tuple(sorted(
            (p, c, cpus) for p, cs in state.entries.items() for c, cpus in cs.items())))
        cpu_bytes = None
        current = self._cpu_checksum
        if key != self._cpu_key:
            cpu_bytes = dumps(state)
            current = _file_checksum(cpu_bytes)
        frags = []
        for k in sorted(self.store.records):
            rec = self.store.records[k]
            cached = self._fragments.get(k)
            if cached is None or cached[0] is not rec:
                cached = (rec, canonical(rec.to_json()))
                self._fragments[k] = cached
            frags.append(cached[1])
        for k in [k for k in self._fragments if k not in self.store.records]:
            del self._fragments[k]
        # sorted-key canonical JSON, assembled from cached per-container fragments (same bytes as canonical())
        data = ('{"apiVersion":' + json.dumps(API_VERSION) + ',"containers":[' + ",".join(frags) + "]"
                + ',"cpuManagerState":' + canonical({"current": current, "previous": self._cpu_checksum})
                + ',"generation":' + str(generation) + ',"kind":' + json.dumps(KIND)
                + ',"mode":' + json.dumps(self.config.mode) + ',"pending":' + canonical(pending) + "}")
        # cci_manager_state first: it names the cpu_manager_state it is about to write, so a kill between the
        # two writes leaves a pair the next start recognises (docs/spec.md §3.5)
        write_atomic(self.cci_path, encode(data))
        if cpu_bytes is not None:
            write_atomic(self.cpu_path, cpu_bytes)
            self._cpu_key = key
            self._cpu_checksum = current

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
                raise self._cci_error(f"unusable content ({exc})") from None
        if self.cpu_path.exists():
            raw = self.cpu_path.read_bytes()
            try:
                state = loads(raw, path=self.cpu_path, policy_name=self.config.policy)
            except CPUManagerStateError as exc:
                raise CheckpointError(f"{exc} ({_DRAIN}; delete {CCI_STATE_FILE} too)") from None
            if self.config.policy == "static":
                problem = validate_static_state(state, self.store.online, self.config.reserved,
                                                self.config.strict_reservation)
                if problem:
                    raise CheckpointError(f"Static policy invalid state, {_DRAIN}: {problem} (file "
                                          f"{str(self.cpu_path)!r}; delete {CCI_STATE_FILE} too)")
            checksum = _file_checksum(raw)
            known = {cpu_meta.get("current"), cpu_meta.get("previous")} - {None}
            if checksum not in known and (state.entries or known):
                raise CheckpointError(
                    f"{CPU_STATE_FILE} (checksum {checksum}) is not the file {CCI_STATE_FILE} was written with "
                    f"(expected one of {sorted(known)}): the two files disagree; please drain this node and delete "
                    f"both {str(self.cpu_path)!r} and {str(self.cci_path)!r} before restarting the node")
            self._cpu_checksum = checksum
        return out

    def _cci_error(self, problem: str) -> CheckpointError:
        return CheckpointError(
            f"could not restore state from checkpoint: {problem}, please drain this node and delete the CCI manager "
            f"checkpoint file {str(self.cci_path)!r} (and {str(self.cpu_path)!r}) before restarting the node")
