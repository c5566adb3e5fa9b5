"""The journal of cci_manager_state: one record per change, snapshots, torn tails dropped, damage refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_node_state import crc32_ieee  # an independent bitwise CRC-32, not zlib's

from cci_conformance.cpuset import parse_cpulist
from cci_conformance.node import state_files as sf
from cci_conformance.node.cci_journal import JournalWriter, read_cci_state
from cci_conformance.node.checkpoint import CCI_JOURNAL_FILE, CCI_STATE_FILE, CPU_STATE_FILE, CheckpointError
from cci_conformance.node.profile import parse_config
from cci_conformance.node.state_files import StateFiles
from cci_conformance.node.store import CCI, STATIC, Record, Store

ONLINE = frozenset(range(64))
CFG = parse_config({"mode": "coexistence", "reservedSystemCPUs": "0"})
FILES = (CCI_STATE_FILE, CCI_JOURNAL_FILE, CPU_STATE_FILE)


def rec(uid: str, source: str = STATIC, cpus: str = "", shared: str = "") -> Record:
    return Record(uid, "c", "ns", f"pod-{uid}", f"id-{uid}", source, exclusive=parse_cpulist(cpus),
                  shared_cpus=parse_cpulist(shared), claim_uid=f"cl-{uid}" if source == CCI else "")


def new_files(root: Path) -> tuple[Store, StateFiles]:
    store = Store(ONLINE, CFG.reserved, False)
    return store, StateFiles(root, CFG, store)


def logical(root: Path) -> tuple:
    loaded = StateFiles(root, CFG, Store(ONLINE, CFG.reserved, False)).load()
    return loaded.generation, loaded.pending, sorted(loaded.records, key=lambda r: r.key)


def test_a_change_appends_one_short_record_whatever_the_store_size(tmp_path):
    store, files = new_files(tmp_path)
    for i in range(200):
        store.add(rec(f"s{i}", CCI, shared="1-63"))
    files.save(1, [])
    snapshot = (tmp_path / CCI_STATE_FILE).read_bytes()
    for i in range(50):
        store.add(rec(f"n{i}", CCI, shared="1-63"))
        before = files.journal.size
        files.save(1, [])
        assert files.journal.size - before < 1024, "a change must cost one record, not the whole store"
    assert (tmp_path / CCI_STATE_FILE).read_bytes() == snapshot  # no rewrite below the compaction threshold
    for line in (tmp_path / CCI_JOURNAL_FILE).read_bytes().split(b"\n")[:-1]:
        crc, _, text = line.partition(b" ")
        assert int(crc, 16) == crc32_ieee(text)
        json.loads(text)
    assert logical(tmp_path)[2] == sorted(store.records.values(), key=lambda r: r.key)


def test_an_unchanged_store_writes_nothing(tmp_path):
    store, files = new_files(tmp_path)
    files.save(1, [])
    size = files.journal.size
    files.save(1, [])
    assert files.journal.size == size


def test_a_grown_journal_becomes_the_next_snapshot_and_is_emptied(tmp_path, monkeypatch):
    monkeypatch.setattr(sf, "JOURNAL_MIN_BYTES", 2000)
    store, files = new_files(tmp_path)
    files.save(1, [])
    epochs = set()
    for i in range(60):
        store.add(rec(f"p{i}", CCI, shared="1-3"))
        files.save(1, [])
        epochs.add(files._epoch)
        if i % 3 == 2:
            store.remove((f"p{i - 1}", "c"))
            files.save(1, [])
    assert len(epochs) > 3 and files.journal.size < 2000 + 1024
    data = read_cci_state({n: (tmp_path / n).read_bytes() for n in FILES})
    assert data["journalEpoch"] == files._epoch
    assert [(r["podUID"], r["container"]) for r in data["containers"]] == sorted(store.records)


class Recorder:
    """Logs every write of the node's state files, in order, to replay a kill between and inside them."""

    def __init__(self, monkeypatch):
        self.ops: list[tuple[str, str, bytes | int]] = []
        real_write, real_append, real_empty = sf.write_atomic, JournalWriter.append, JournalWriter.empty
        ops = self.ops

        def write_atomic(path, data, **kw):
            ops.append((Path(path).name, "replace", data))
            real_write(path, data, **kw)

        def append(writer, line):
            ops.append((CCI_JOURNAL_FILE, "append", line))
            real_append(writer, line)

        def empty(writer):
            ops.append((CCI_JOURNAL_FILE, "truncate", 0))
            real_empty(writer)

        monkeypatch.setattr(sf, "write_atomic", write_atomic)
        monkeypatch.setattr(JournalWriter, "append", append)
        monkeypatch.setattr(JournalWriter, "empty", empty)


def perform(files: dict[str, bytes], name: str, kind: str, arg) -> None:
    if kind == "replace":
        files[name] = arg
    elif kind == "append":
        files[name] = files.get(name, b"") + arg
    else:
        files[name] = files.get(name, b"")[:arg]


def workload(store: Store, files: StateFiles):
    """Static grants (the cpu_manager_state changes too), CCI grants, intents, removals, restarts."""
    pending: list[dict] = []
    generation = 1
    files.save(generation, pending)
    yield
    for i in range(1, 40):
        intent = {"why": "admission", "containerID": f"id-c{i}", "driver": "d"}
        pending.append(intent)
        files.save(generation, pending)
        yield
        pending.remove(intent)
        store.add(rec(f"c{i}", CCI, cpus=str(i)) if i % 2 else rec(f"c{i}", STATIC, cpus=str(i)))
        files.save(generation, pending)
        yield
        if i % 5 == 0:
            gone = store.remove((f"c{i - 2}", "c"))
            pending.append({"why": "removal", "containerID": gone.container_id, "driver": "d"})
            files.save(generation, pending)
            yield
        if i % 13 == 0:
            generation += 1
            files.save(generation, pending, compact=True)
            yield


def test_a_kill_at_any_byte_recovers_the_state_before_or_after_the_change(tmp_path, monkeypatch):
    """Every write of a long workload cut at every byte (appends) or before/after (atomic replaces):
    the next start must load the state before the change being made or after it, never refuse, and a
    change whose save returned must survive."""
    monkeypatch.setattr(sf, "JOURNAL_MIN_BYTES", 1500)  # several snapshots inside the workload
    recorder = Recorder(monkeypatch)
    run = tmp_path / "run"
    run.mkdir()
    store, files = new_files(run)
    steps, acked = [], [None]
    for _ in workload(store, files):
        steps.append(list(recorder.ops))
        recorder.ops.clear()
        acked.append(logical(run))
    monkeypatch.undo()
    crash = tmp_path / "crash"

    def recover(state: dict[str, bytes]):
        shutil.rmtree(crash, ignore_errors=True)
        crash.mkdir()
        for name, content in state.items():
            (crash / name).write_bytes(content)
        return logical(crash) if state else None

    disk: dict[str, bytes] = {}
    cuts = snapshots = 0
    for n, ops in enumerate(steps, start=1):
        for name, kind, arg in ops:
            # every byte in the last changes, every 13th before (a 1-byte stride everywhere takes 15 s)
            points = range(0, len(arg), 1 if n > len(steps) - 6 else 13) if kind == "append" else [None]
            for cut in points:
                state = dict(disk)
                if cut is not None:
                    perform(state, name, kind, arg[:cut])
                assert recover(state) in (acked[n - 1], acked[n]), f"change {n}: {name} {kind} cut at {cut}"
                cuts += 1
            snapshots += name == CCI_STATE_FILE
            perform(disk, name, kind, arg)
        assert recover(disk) == acked[n], f"change {n} was saved but did not survive"
    assert cuts > 1000 and snapshots > 4


@pytest.fixture
def saved(tmp_path):
    store, files = new_files(tmp_path)
    files.save(1, [])
    for i in range(1, 6):  # SHARED groups: the cpu_manager_state stays as it is
        store.add(rec(f"c{i}", CCI, shared=str(i)))
        files.save(1, [])
    return tmp_path


def refusal(root: Path) -> str:
    with pytest.raises(CheckpointError) as info:
        logical(root)
    text = str(info.value)
    assert "please drain this node and delete the CCI manager checkpoint file" in text and CCI_JOURNAL_FILE in text
    return text


def test_a_torn_last_record_is_dropped(saved):
    journal = saved / CCI_JOURNAL_FILE
    raw = journal.read_bytes()
    journal.write_bytes(raw[:-9])  # the last record cut short: its change was never acknowledged
    assert [r.pod_uid for r in logical(saved)[2]] == ["c1", "c2", "c3", "c4"]


def test_a_damaged_whole_record_is_refused(saved):
    journal = saved / CCI_JOURNAL_FILE
    journal.write_bytes(journal.read_bytes().replace(b'"c3/c"', b'"c9/c"'))
    assert "line 3 is damaged" in refusal(saved)


def test_a_missing_record_is_refused(saved):
    journal = saved / CCI_JOURNAL_FILE
    lines = journal.read_bytes().split(b"\n")
    journal.write_bytes(b"\n".join(lines[:1] + lines[2:]))
    assert "record 2 of epoch 1 is missing" in refusal(saved)


def test_a_journal_newer_than_its_snapshot_is_refused(saved, tmp_path_factory):
    old = tmp_path_factory.mktemp("old")
    store, files = new_files(old)
    files.save(1, [])
    files.save(1, [], compact=True)  # epoch 2 on this side
    store.add(rec("x", CCI, cpus="9"))
    files.save(1, [])
    shutil.copy(old / CCI_JOURNAL_FILE, saved / CCI_JOURNAL_FILE)
    assert "belongs to snapshot epoch 2, but cci_manager_state is epoch 1" in refusal(saved)


def test_a_journal_without_its_snapshot_is_refused(saved):
    (saved / CCI_STATE_FILE).unlink()
    assert "is missing" in refusal(saved)


def test_readers_see_what_the_node_loads(saved):
    data = read_cci_state({n: (saved / n).read_bytes() for n in FILES})
    assert [r["podUID"] for r in data["containers"]] == [f"c{i}" for i in range(1, 6)]
    assert read_cci_state({}) == {}
