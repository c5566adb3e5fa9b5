"""cpu_manager_state: bit-exact v2 files, checksum vectors checked by an independent spew+FNV, restore errors."""

from __future__ import annotations

import json
import os
import tempfile
from functools import reduce
from pathlib import Path

import pytest

from cci_conformance.cpu_manager_state import (
    CPUManagerState,
    CPUManagerStateError,
    dumps,
    loads,
    read_state_file,
    spew_for_hash,
    write_state_file,
)
from cci_conformance.cpuset import parse_cpulist

PUBLIC_VECTOR = (
    "(*state.CPUManagerCheckpoint){PolicyName:(string)static DefaultCPUSet:(string)0,2-12,14-23 "
    "Entries:(map[string]map[string]string)map[235148fe-393f-47a8-a17d-bd55bc1a836b:map[cgroup1-0:1,13]] "
    "Checksum:(checksum.Checksum)0}"
)


# ---- an independent model of go-spew's %#v (ConfigState{SortKeys, DisableMethods}) and of FNV-1a/32 ----
def go_spew(value, *, annotate=True) -> str:
    """Render ("ptr", T, v) / ("struct", T, [(name, v)]) / ("map", T, {k: v}) / (T, scalar) like spew %#v.

    Types print before values except directly inside a map (spew sets ignoreNextType for keys and values).
    """
    kind = value[0]
    if kind == "ptr":
        return f"(*{value[1]})" + go_spew(value[2], annotate=False)
    if kind == "struct":
        head = f"({value[1]})" if annotate else ""
        return head + "{" + " ".join(f"{n}:{go_spew(v)}" for n, v in value[2]) + "}"
    if kind == "map":
        head = f"({value[1]})" if annotate else ""
        items = sorted(value[2].items(), key=lambda kv: kv[0].encode())
        return head + "map[" + " ".join(f"{k}:{go_spew(v, annotate=False)}" for k, v in items) + "]"
    return (f"({kind})" if annotate else "") + str(value[1])


def fnv32a(text: str) -> int:
    return reduce(lambda h, b: ((h ^ b) * 16777619) % (1 << 32), text.encode(), 2166136261)


def independent_checksum(policy: str, default: str, entries: dict, *, v1=False) -> int:
    if v1:
        ent = ("map", "map[string]string", {k: ("string", v) for k, v in entries.items()})
    else:
        ent = (
            "map",
            "map[string]map[string]string",
            {p: ("map", "map[string]string", {c: ("string", s) for c, s in cs.items()}) for p, cs in entries.items()},
        )
    checkpoint = ("struct", "state.CPUManagerCheckpoint", [
        ("PolicyName", ("string", policy)),
        ("DefaultCPUSet", ("string", default)),
        ("Entries", ent),
        ("Checksum", ("checksum.Checksum", 0)),
    ])
    return fnv32a(go_spew(("ptr", "state.CPUManagerCheckpoint", checkpoint)))


def st(policy, default, entries=None) -> CPUManagerState:
    return CPUManagerState(
        policy, parse_cpulist(default),
        {p: {c: parse_cpulist(s) for c, s in cs.items()} for p, cs in (entries or {}).items()},
    )


def test_public_vector_rendering_and_checksum():
    entries = {"235148fe-393f-47a8-a17d-bd55bc1a836b": {"cgroup1-0": "1,13"}}
    assert spew_for_hash("static", "0,2-12,14-23", entries) == PUBLIC_VECTOR
    assert go_spew(("ptr", "state.CPUManagerCheckpoint", ("struct", "state.CPUManagerCheckpoint", [
        ("PolicyName", ("string", "static")), ("DefaultCPUSet", ("string", "0,2-12,14-23")),
        ("Entries", ("map", "map[string]map[string]string",
                     {"235148fe-393f-47a8-a17d-bd55bc1a836b": ("map", "m", {"cgroup1-0": ("string", "1,13")})})),
        ("Checksum", ("checksum.Checksum", 0))]))) == PUBLIC_VECTOR
    data = dumps(st("static", "0,2-12,14-23", entries))
    assert data == (
        b'{"policyName":"static","defaultCpuSet":"0,2-12,14-23","entries":'
        b'{"235148fe-393f-47a8-a17d-bd55bc1a836b":{"cgroup1-0":"1,13"}},"checksum":1552716370}'
    )


CASES = [
    st("static", "0-127"),
    st("none", ""),
    st("static", "0,2-3,64-127", {"pod-b": {"z": "4-63", "a": "1"}}),
    st("static", "0-1,6-7", {
        "11111111-aaaa": {"app": "2,4", "sidecar": "3,5"},
        "00000000-bbbb": {"main": "8-1023"},
        "Zpod": {"c": "1024"},
    }),
]


@pytest.mark.parametrize("state", CASES, ids=range(len(CASES)))
def test_written_files_verify_under_an_independent_checksum(state):
    workdir = Path(tempfile.mkdtemp(prefix="cci-", dir="/tmp"))
    try:
        path = workdir / "cpu_manager_state"
        write_state_file(path, state)
        raw = path.read_bytes()
        assert os.listdir(workdir) == ["cpu_manager_state"]  # no temp file left behind
        obj = json.loads(raw)
        assert list(obj) == (["policyName", "defaultCpuSet"] + (["entries"] if state.entries else []) + ["checksum"])
        assert b" " not in raw and not raw.endswith(b"\n")
        assert obj["checksum"] == independent_checksum(obj["policyName"], obj["defaultCpuSet"], obj.get("entries", {}))
        assert obj["checksum"] != 0
        assert read_state_file(path, policy_name=state.policy_name) == state
    finally:
        for p in workdir.iterdir():
            p.unlink()
        workdir.rmdir()


def test_json_is_go_compact_with_sorted_map_keys():
    data = dumps(st("static", "0", {"b": {"y": "2", "x": "1"}, "a": {"k": "3"}}))
    expected = b'{"policyName":"static","defaultCpuSet":"0","entries":{"a":{"k":"3"},"b":{"x":"1","y":"2"}}'
    assert data.startswith(expected)


def test_missing_file_reads_as_none():
    assert read_state_file("/nonexistent-dir-for-cci/cpu_manager_state") is None


def restore_error(inner: str, path="/var/lib/kubelet/cpu_manager_state") -> str:
    return (
        f"could not restore state from checkpoint: {inner}, please drain this node and delete the CPU manager "
        f'checkpoint file "{path}" before restarting Kubelet'
    )


def test_zero_checksum_is_accepted():
    data = b'{"policyName":"static","defaultCpuSet":"0-3","entries":{"p":{"c":"4-5"}},"checksum":0}'
    assert loads(data) == st("static", "0-3", {"p": {"c": "4-5"}})


def test_corrupt_checksum_without_entries():
    good = dumps(st("static", "0-7"))
    bad = good.replace(b'"0-7"', b'"0-6"')
    with pytest.raises(CPUManagerStateError) as e:
        loads(bad, path="/var/lib/kubelet/cpu_manager_state")
    assert str(e.value) == restore_error("checkpoint is corrupted")


def test_corrupt_checksum_with_v2_entries_reports_the_v1_decode_error():
    # restoreState falls back to the v1 layout, whose decoding of a v2 entry is what fails last.
    bad = dumps(st("static", "0-3", {"pod": {"c": "4-5"}})).replace(b'"4-5"', b'"4-6"')
    with pytest.raises(CPUManagerStateError) as e:
        loads(bad, path="/var/lib/kubelet/cpu_manager_state")
    assert str(e.value) == restore_error(
        "json: cannot unmarshal object into Go struct field CPUManagerCheckpointV1.entries of type string"
    )


def test_policy_change_is_refused():
    with pytest.raises(CPUManagerStateError) as e:
        loads(dumps(st("none", "0-3")), path="/k/cpu_manager_state", policy_name="static")
    assert str(e.value) == restore_error('configured policy "static" differs from state checkpoint policy "none"',
                                         "/k/cpu_manager_state")


def test_unparsable_cpuset_is_refused():
    data = b'{"policyName":"static","defaultCpuSet":"0-3","entries":{"p":{"c":"x"}},"checksum":0}'
    with pytest.raises(CPUManagerStateError, match=r'could not parse cpuset "x" for container "c" in pod "p"'):
        loads(data)
    with pytest.raises(CPUManagerStateError, match=r'could not parse default cpu set "3-1"'):
        loads(b'{"policyName":"static","defaultCpuSet":"3-1","checksum":0}')
    with pytest.raises(CPUManagerStateError, match="please drain this node"):
        loads(b"{not json")


def test_v1_file_migrates_with_the_container_map():
    entries = {"cid-1": "2-3", "cid-2": "4"}
    total = independent_checksum("static", "0-1,5-7", entries, v1=True)
    data = json.dumps({"policyName": "static", "defaultCpuSet": "0-1,5-7", "entries": entries, "checksum": total},
                      separators=(",", ":")).encode()
    state = loads(data, container_map={"cid-1": ("pod-a", "app"), "cid-2": ("pod-b", "db")})
    assert state == st("static", "0-1,5-7", {"pod-a": {"app": "2-3"}, "pod-b": {"db": "4"}})
    with pytest.raises(CPUManagerStateError, match="containerID 'cid-2' not found in initial containers list"):
        loads(data, container_map={"cid-1": ("pod-a", "app")})
    # The same content under the v2 checksum is not a valid v1 file.
    wrong = data.replace(str(total).encode(), str(independent_checksum("static", "0-1,5-7", {})).encode())
    with pytest.raises(CPUManagerStateError, match="checkpoint is corrupted"):
        loads(wrong, container_map={"cid-1": ("pod-a", "app"), "cid-2": ("pod-b", "db")})


def test_failed_write_keeps_the_previous_file(monkeypatch):
    workdir = Path(tempfile.mkdtemp(prefix="cci-", dir="/tmp"))
    path = workdir / "cpu_manager_state"
    try:
        write_state_file(path, st("static", "0-3"))
        before = path.read_bytes()

        def broken_fsync(fd):
            raise OSError("disk on fire")

        monkeypatch.setattr(os, "fsync", broken_fsync)
        with pytest.raises(OSError, match="disk on fire"):
            write_state_file(path, st("static", "0-2", {"p": {"c": "3"}}))
        monkeypatch.undo()
        assert path.read_bytes() == before
        assert os.listdir(workdir) == ["cpu_manager_state"]
    finally:
        for p in workdir.iterdir():
            p.unlink()
        workdir.rmdir()


def test_strings_are_escaped_as_go_encoding_json_does():
    data = dumps(st("static", "0", {'a<b>&"\\\n\x01\u2028é': {"c": "1"}}))
    assert b'"a\\u003cb\\u003e\\u0026\\"\\\\\\n\\u0001\\u2028\xc3\xa9":{"c":"1"}' in data
    obj = json.loads(data)
    assert obj["checksum"] == independent_checksum("static", "0", obj["entries"])
