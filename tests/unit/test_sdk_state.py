"""The driver checkpoint: a CRC-protected journal over two snapshot slots; torn writes drop, damage refuses."""

from __future__ import annotations

import json
import shutil

import pytest

from cci_conformance.driver_sdk.state import FORMAT_VERSION, JOURNAL_FILES, STATE_FILE, StateError, StateStore


def value(i: int, size: int = 20) -> str:
    return json.dumps({"cpus": str(i), "pad": "x" * size}, sort_keys=True, separators=(",", ":"))


def reload(path, **kw) -> dict | None:
    return StateStore(path, background_sync=False, **kw).load()


def expected(entries: dict[str, str]) -> dict:
    return {k: json.loads(v) for k, v in entries.items()}


@pytest.fixture
def store(tmp_path):
    s = StateStore(tmp_path, background_sync=False)
    s.load()
    yield s
    s.close()


def test_nothing_saved_loads_as_none(tmp_path, store):
    assert store.load() is None


def test_round_trip_keeps_values_and_order(tmp_path, store):
    for i in range(5):
        store.apply({f"k{i}": value(i)})
    store.apply({"k1": value(10)}, ["k3"])
    store.apply({}, ["k0"])
    loaded = reload(tmp_path)
    assert loaded == {"k1": json.loads(value(10)), "k2": json.loads(value(2)), "k4": json.loads(value(4))}
    assert list(loaded) == ["k1", "k2", "k4"]  # insertion order, as the policy's admissions dict keeps it


def test_a_new_store_continues_without_an_explicit_load(tmp_path, store):
    store.apply({"a": value(1)})
    store.close()
    again = StateStore(tmp_path, background_sync=False)
    again.apply({"b": value(2)})  # must continue the record sequence, not restart it at 1
    again.close()
    assert reload(tmp_path) == {"a": json.loads(value(1)), "b": json.loads(value(2))}


def test_a_change_writes_one_record_whatever_the_state_size(tmp_path):
    s = StateStore(tmp_path, background_sync=False, journal_min_bytes=10**9)
    sizes = []
    for i in range(2000):
        before = s._offset
        s.apply({f"k{i:05d}": value(i)})
        sizes.append(s._offset - before)
    assert max(sizes) < 120 and max(sizes) - min(sizes) <= 8  # O(1): only the digits of i and seq grow
    assert not (tmp_path / STATE_FILE).exists() and s.seq == 0
    s.close()


def test_compaction_moves_to_the_other_slot_and_journal(tmp_path):
    s = StateStore(tmp_path, background_sync=False, journal_min_bytes=1000)
    want = {}
    for i in range(300):
        want[f"k{i % 40}"] = value(i)
        s.apply({f"k{i % 40}": value(i)})
    assert s.seq >= 3  # several compactions, both slots and both journals reused in place
    assert all((tmp_path / name).exists() for name in (STATE_FILE, "driver_state.1.json", *JOURNAL_FILES))
    assert s._offset < 2 * 1000 + 2 * s._snapshot_bytes
    s.close()
    assert reload(tmp_path) == expected(want)


class Recording(StateStore):
    """A store that logs every file operation, in order, to replay crashes between and inside them."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.ops: list[tuple[str, int, bytes | None]] = []  # (file name, offset, payload; None = truncate)

    def _pwrite(self, path, payload, offset):
        self.ops.append((path.name, offset, payload))
        super()._pwrite(path, payload, offset)

    def _truncate(self, path):
        self.ops.append((path.name, 0, None))
        super()._truncate(path)


def changes_with_deletes(n):
    return [({f"k{i}": value(i, size=30)}, [f"k{i - 3}"] if i % 4 == 3 else []) for i in range(n)]


def perform(files: dict[str, bytes], name: str, offset: int, payload: bytes | None) -> None:
    old = files.get(name, b"")
    if payload is None:
        files[name] = b""
    else:
        old = old.ljust(offset, b"\0")
        files[name] = old[:offset] + payload + old[offset + len(payload):]


# plain appends; then appends, snapshots and emptied journals
@pytest.mark.parametrize("journal_min_bytes, count", [(10**9, 40), (300, 14)])
def test_a_kill_at_any_byte_recovers_a_prefix_of_the_acknowledged_changes(tmp_path, journal_min_bytes, count):
    """Replays every file operation of the changes, cut at every byte (a snapshot every few bytes): what a
    kill -9 mid-pwrite leaves. Recovery must give the state before or after the change being made, never a
    refusal; once a change is acknowledged it must survive."""
    s = Recording(tmp_path / "run", background_sync=False, journal_min_bytes=journal_min_bytes)
    s.load()
    steps, acked, entries = [], [None], {}
    for put, deleted in changes_with_deletes(count):
        first = len(s.ops)
        s.apply(put, deleted)
        steps.append(s.ops[first:])
        for k in deleted:
            entries.pop(k, None)
        entries.update(put)
        acked.append(expected(entries))
    s.close()
    crash = tmp_path / "crash"
    files: dict[str, bytes] = {}
    checked, snapshot_cuts = 0, 0

    def recover(state):
        shutil.rmtree(crash, ignore_errors=True)
        crash.mkdir()
        for name, content in state.items():
            (crash / name).write_bytes(content)
        return reload(crash)

    for n, ops in enumerate(steps, start=1):
        compaction = any(name.endswith(".json") for name, _, _ in ops)
        check = n > len(steps) - 8 or (compaction and snapshot_cuts < 150)
        for name, offset, payload in ops:
            if check:
                journal = name in JOURNAL_FILES
                size = len(payload) if payload is not None else 0
                cuts = range(0, size, 1 if journal else 7) if payload is not None else [0]
                for cut in cuts:
                    state = dict(files)
                    if payload is not None:
                        perform(state, name, offset, payload[:cut])
                    assert recover(state) in (acked[n - 1], acked[n]), f"change {n}, {name} cut at byte {cut}"
                    checked += 1
                    snapshot_cuts += not journal
            perform(files, name, offset, payload)
        assert recover(files) == acked[n], f"change {n} was acknowledged but did not survive"
    assert checked > 500
    assert snapshot_cuts > 0 or journal_min_bytes > 10**6  # the compacting run really cut snapshot writes


def test_torn_tail_record_is_dropped_and_overwritten(tmp_path, store):
    store.apply({"a": value(1)})
    store.apply({"b": value(2)})
    journal = tmp_path / JOURNAL_FILES[0]
    raw = journal.read_bytes()
    journal.write_bytes(raw[: len(raw) - 7])  # the second record cut short by a crash
    again = StateStore(tmp_path, background_sync=False)
    assert again.load() == {"a": json.loads(value(1))}
    again.apply({"c": value(3)})  # the next record replaces the torn one
    again.close()
    assert reload(tmp_path) == {"a": json.loads(value(1)), "c": json.loads(value(3))}


@pytest.mark.parametrize("line, damage, message", [
    (1, lambda b: b.replace(b'"k1"', b'"kX"'), "record 2 of snapshot 0 was altered"),  # a flip mid-journal
    (3, lambda b: b.replace(b'"k3"', b'"kX"'), "record 4 of snapshot 0 was altered"),  # ... in the last record
    (1, lambda b: b[:25], "record 2 of snapshot 0 is damaged but later records are whole"),
])
def test_damage_a_crash_cannot_explain_is_refused(tmp_path, store, line, damage, message):
    for i in range(4):
        store.apply({f"k{i}": value(i)})
    journal = tmp_path / JOURNAL_FILES[0]
    lines = journal.read_bytes().split(b"\n")
    lines[line] = damage(lines[line])
    journal.write_bytes(b"\n".join(lines))
    with pytest.raises(StateError, match=f"{message}.*delete"):
        reload(tmp_path)


def compacted(tmp_path) -> StateStore:
    s = StateStore(tmp_path, background_sync=False, journal_min_bytes=300)
    for i in range(12):
        s.apply({f"k{i}": value(i)})
    assert s.seq >= 1
    s.apply({"after": value(99)})  # a record on top of the newest snapshot
    s.close()
    return s


def test_corrupt_snapshot_refuses_to_start(tmp_path):
    s = compacted(tmp_path)
    slot = s.path
    raw = bytearray(slot.read_bytes())
    raw[30] ^= 0x01
    slot.write_bytes(bytes(raw))
    with pytest.raises(StateError) as err:
        reload(tmp_path)
    assert "torn or damaged" in str(err.value) and "delete" in str(err.value)


def test_missing_snapshot_under_a_journal_refuses_to_start(tmp_path):
    s = compacted(tmp_path)
    s.path.unlink()
    with pytest.raises(StateError, match="missing or older"):
        reload(tmp_path)


@pytest.mark.parametrize("doc, message", [
    ({"checksum": "crc32:00000000", "data": {}, "seq": 3, "version": 2}, "format version 2"),
    ({"data": {}, "seq": 3, "version": 99}, "format version 99"),
])
def test_other_format_versions_are_refused(tmp_path, doc, message):
    text = json.dumps(doc, separators=(",", ":"))
    if doc["version"] == 99:  # a whole, checksummed line of an unknown version
        import zlib
        text = f"{zlib.crc32(text.encode()):08x} {text}\n"
    (tmp_path / STATE_FILE).write_text(text)
    with pytest.raises(StateError, match=message):
        reload(tmp_path)
    assert FORMAT_VERSION == 3


def test_save_replaces_the_whole_state(tmp_path, store):
    store.apply({"a": value(1)})
    store.save({"b": {"n": 2}})
    assert reload(tmp_path) == {"b": {"n": 2}}
