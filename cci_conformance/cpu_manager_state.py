"""The kubelet's ``cpu_manager_state`` checkpoint (v2 format, v1 migration), bit for bit, with its checksum."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .cpuset import CPUListError, CPUs, format_cpulist, parse_cpulist

CHECKPOINT_NAME = "cpu_manager_state"
_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


@dataclass
class CPUManagerState:
    """What the CPU manager keeps: the shared pool (``default_cpuset``) and the exclusive assignments."""

    policy_name: str
    default_cpuset: CPUs = frozenset()
    entries: dict[str, dict[str, CPUs]] = field(default_factory=dict)  # pod UID -> container name -> CPUs

    def get(self, pod_uid: str, container: str) -> CPUs | None:
        return self.entries.get(pod_uid, {}).get(container)

    def set(self, pod_uid: str, container: str, cpus: CPUs) -> None:
        self.entries.setdefault(pod_uid, {})[container] = frozenset(cpus)

    def delete(self, pod_uid: str, container: str) -> None:
        """Drop one assignment, and the pod's map once it is empty (state_mem.go Delete)."""
        pod = self.entries.get(pod_uid)
        if pod is None:
            return
        pod.pop(container, None)
        if not pod:
            del self.entries[pod_uid]

    def assigned(self) -> CPUs:
        """Every CPU held by some assignment."""
        out: set[int] = set()
        for pod in self.entries.values():
            for cpus in pod.values():
                out |= cpus
        return frozenset(out)

    def copy(self) -> CPUManagerState:
        return CPUManagerState(self.policy_name, self.default_cpuset, {p: dict(c) for p, c in self.entries.items()})


class CPUManagerStateError(Exception):
    """A checkpoint the kubelet would refuse to start with; ``str()`` is the kubelet's message."""


# ---- checksum: FNV-1a 32 over the go-spew "%#v" rendering (dump.ForHash), with Checksum = 0 ----
def fnv1a_32(data: bytes) -> int:
    """FNV-1a 32-bit. Four bytes per step, masked once: XOR with a byte and multiplication both commute
    with reduction mod 2**32, so the intermediate masks can be dropped (about 40% faster in CPython)."""
    p = _FNV_PRIME
    h = _FNV_OFFSET
    cut = len(data) - len(data) % 4
    it = iter(data[:cut])
    for b0, b1, b2, b3 in zip(it, it, it, it, strict=True):
        h = (((((((h ^ b0) * p) ^ b1) * p ^ b2) * p) ^ b3) * p) & 0xFFFFFFFF
    for byte in data[cut:]:
        h = ((h ^ byte) * p) & 0xFFFFFFFF
    return h


def _spew_map(value: Mapping[str, object]) -> str:
    # Map keys and values carry no type annotation inside a map; keys are sorted (SortKeys).
    parts = []
    for key in sorted(value):
        inner = value[key]
        parts.append(f"{key}:{_spew_map(inner) if isinstance(inner, Mapping) else inner}")
    return "map[" + " ".join(parts) + "]"


def spew_for_hash(policy_name: str, default_cpuset: str, entries: Mapping[str, object], *, v1: bool = False) -> str:
    """The one-line ``%#v`` rendering of ``*state.CPUManagerCheckpoint`` with Checksum 0.

    v1 entries are ``map[string]string``; the kubelet renames the V1 type to the legacy name before hashing.
    """
    entries_type = "map[string]string" if v1 else "map[string]map[string]string"
    return (
        "(*state.CPUManagerCheckpoint){"
        f"PolicyName:(string){policy_name} "
        f"DefaultCPUSet:(string){default_cpuset} "
        f"Entries:({entries_type}){_spew_map(entries)} "
        "Checksum:(checksum.Checksum)0}"
    )


def checksum(policy_name: str, default_cpuset: str, entries: Mapping[str, object], *, v1: bool = False) -> int:
    return fnv1a_32(spew_for_hash(policy_name, default_cpuset, entries, v1=v1).encode("utf-8"))


# ---- Go's encoding/json output ----
_NEEDS_ESCAPE = re.compile(r'[^\x20-\x7e]|[<>&"\\]')


def _go_json_string(text: str) -> str:
    """A JSON string exactly as Go's json.Marshal writes it (HTML-safe escaping, \\u00XX controls)."""
    if _NEEDS_ESCAPE.search(text) is None:  # the usual case: printable ASCII, nothing to escape
        return f'"{text}"'
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif code < 0x20 or ch in "<>&" or code in (0x2028, 0x2029):
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def dumps(state: CPUManagerState) -> bytes:
    """The v2 file content the kubelet writes: compact JSON, struct key order, ``entries`` omitted when empty.

    The spew rendering and the JSON are built in one pass over the sorted entries (the node calls this
    on every change, so it stays flat rather than recursive).
    """
    default = format_cpulist(state.default_cpuset)
    spew_pods: list[str] = []
    json_pods: list[str] = []
    for pod in sorted(state.entries):
        containers = state.entries[pod]
        spew_items: list[str] = []
        json_items: list[str] = []
        for name in sorted(containers):
            cpulist = format_cpulist(containers[name])
            spew_items.append(f"{name}:{cpulist}")
            json_items.append(f"{_go_json_string(name)}:{_go_json_string(cpulist)}")
        spew_pods.append(f"{pod}:map[{' '.join(spew_items)}]")
        json_pods.append(f"{_go_json_string(pod)}:{{{','.join(json_items)}}}")
    rendered = (
        f"(*state.CPUManagerCheckpoint){{PolicyName:(string){state.policy_name} DefaultCPUSet:(string){default} "
        f"Entries:(map[string]map[string]string)map[{' '.join(spew_pods)}] Checksum:(checksum.Checksum)0}}"
    )
    total = fnv1a_32(rendered.encode("utf-8"))
    body = f'{{"policyName":{_go_json_string(state.policy_name)},"defaultCpuSet":{_go_json_string(default)}'
    if json_pods:
        body += f',"entries":{{{",".join(json_pods)}}}'
    body += f',"checksum":{total}}}'
    return body.encode("utf-8")


def write_state_file(path: str | os.PathLike[str], state: CPUManagerState) -> None:
    """Write atomically: temp file in the same directory, fsync, rename, fsync the directory."""
    target = Path(path)
    data = dumps(state)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


# ---- reading (state_checkpoint.go restoreState + checkpoint.go VerifyChecksum) ----
def _field(obj: dict, name: str):
    """Go's json.Unmarshal field matching: exact name first, else case-insensitive."""
    if name in obj:
        return obj[name]
    for key, value in obj.items():
        if key.lower() == name.lower():
            return value
    return None


def _json_kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return f"number {json.dumps(value)}"
    return {dict: "object", list: "array", str: "string"}.get(type(value), "value")


def _type_error(value: object, field_path: str, go_type: str) -> ValueError:
    # encoding/json UnmarshalTypeError text, for the v1 struct (the last layout the kubelet tries).
    kind = _json_kind(value)
    if kind.startswith("number") and go_type == "string":
        kind = "number"
    return ValueError(
        f"json: cannot unmarshal {kind} into Go struct field CPUManagerCheckpointV1.{field_path} of type {go_type}"
    )


def _decode(data: bytes) -> tuple[str, str, dict, int]:
    """Unmarshal the fields both layouts share; Go-style errors for values of the wrong JSON type."""
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"invalid JSON: {e}") from None
    if not isinstance(obj, dict):
        raise ValueError(f"json: cannot unmarshal {_json_kind(obj)} into Go value of type state.CPUManagerCheckpointV1")
    policy = _field(obj, "policyName")
    default = _field(obj, "defaultCpuSet")
    entries = _field(obj, "entries")
    total = _field(obj, "checksum")
    for name, value in (("policyName", policy), ("defaultCpuSet", default)):
        if value is not None and not isinstance(value, str):
            raise _type_error(value, name, "string")
    if entries is not None and not isinstance(entries, dict):
        raise _type_error(entries, "entries", "map[string]string")
    if total is not None and (isinstance(total, bool) or not isinstance(total, int) or not 0 <= total < 2**64):
        raise _type_error(total, "checksum", "checksum.Checksum")
    return policy or "", default or "", entries or {}, total or 0


def _v1_shape_error(entries: dict) -> ValueError | None:
    # encoding/json puts struct fields on the error's field path, never map keys.
    for value in entries.values():
        if value is not None and not isinstance(value, str):
            return _type_error(value, "entries", "string")
    return None


def _is_v2_shape(entries: dict) -> bool:
    return all(isinstance(v, dict) and all(isinstance(x, str) for x in v.values()) for v in entries.values())


def _checksum_ok(policy: str, default: str, entries: dict, total: int, *, v1: bool) -> bool:
    # "accept empty checksum for compatibility with old file backend" (v1 and v2 VerifyChecksum).
    return total == 0 or checksum(policy, default, entries, v1=v1) == total


def _restore(data: bytes, policy_name: str | None, container_map: Mapping[str, tuple[str, str]] | None):
    """restoreState: the v2 layout first; on any failure the v1 layout, whose error is the one reported."""
    policy, default, entries, total = _decode(data)
    if _is_v2_shape(entries) and _checksum_ok(policy, default, entries, total, v1=False):
        migrated: dict[str, dict[str, str]] = entries
    else:
        shape_error = _v1_shape_error(entries)
        if shape_error is not None:
            raise shape_error
        entries = {k: v or "" for k, v in entries.items()}
        if not _checksum_ok(policy, default, entries, total, v1=True):
            raise ValueError("checkpoint is corrupted")
        migrated = {}
        for container_id, cpulist in entries.items():
            ref = (container_map or {}).get(container_id)
            if ref is None:
                raise ValueError(f"containerID '{container_id}' not found in initial containers list")
            migrated.setdefault(ref[0], {})[ref[1]] = cpulist
    if policy_name is not None and policy_name != policy:
        raise ValueError(
            f"configured policy {_go_quote(policy_name)} differs from state checkpoint policy {_go_quote(policy)}"
        )
    try:
        default_cpus = parse_cpulist(default)
    except CPUListError as e:
        raise ValueError(f"could not parse default cpu set {_go_quote(default)}: {e}") from None
    state = CPUManagerState(policy, default_cpus, {})
    for pod, conts in migrated.items():
        for name, cpulist in conts.items():
            try:
                state.set(pod, name, parse_cpulist(cpulist))
            except CPUListError as e:
                raise ValueError(
                    f"could not parse cpuset {_go_quote(cpulist)} for container {_go_quote(name)} "
                    f"in pod {_go_quote(pod)}: {e}"
                ) from None
    return state


def loads(
    data: bytes,
    *,
    path: str | os.PathLike[str] = CHECKPOINT_NAME,
    policy_name: str | None = None,
    container_map: Mapping[str, tuple[str, str]] | None = None,
) -> CPUManagerState:
    """Read a checkpoint as the kubelet restores it; raise CPUManagerStateError with its message.

    ``policy_name``: the configured policy, checked as the kubelet does (None skips the check).
    ``container_map``: container ID -> (pod UID, container name), needed to migrate a v1 file.
    """
    try:
        return _restore(data, policy_name, container_map)
    except ValueError as e:
        raise CPUManagerStateError(
            f"could not restore state from checkpoint: {e}, please drain this node and delete the CPU manager "
            f"checkpoint file {_go_quote(str(path))} before restarting Kubelet"
        ) from None


def read_state_file(path: str | os.PathLike[str], **kwargs) -> CPUManagerState | None:
    """Load the file at ``path`` (see ``loads``); None when it does not exist (the kubelet then creates it)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    return loads(data, path=path, **kwargs)


def _go_quote(text: str) -> str:
    """Go's %q for the plain strings used here: double quotes, backslash escapes."""
    return json.dumps(text, ensure_ascii=False)
