"""The driver checkpoint: checksummed JSON in two alternating slots; torn writes fall back, altered files refuse."""

from __future__ import annotations

import json

import pytest

from cci_conformance.driver_sdk.state import STATE_FILE, StateError, StateStore


@pytest.fixture
def store(tmp_path):
    s = StateStore(tmp_path)
    yield s
    s.close()


def test_round_trip_newest_wins(tmp_path, store):
    assert store.load() is None
    for i in range(5):
        store.save({"admissions": [i]})
    other = StateStore(tmp_path, background_sync=False)
    assert other.load() == {"admissions": [4]}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["driver_state.1.json", STATE_FILE]


def test_shorter_state_is_padded_not_truncated(tmp_path, store):
    store.save({"admissions": ["x" * 500]})
    store.save({"admissions": ["y" * 500]})
    store.save({"admissions": []})
    assert StateStore(tmp_path, background_sync=False).load() == {"admissions": []}


def test_a_new_store_continues_the_sequence(tmp_path, store):
    store.save({"n": 1})
    store.save({"n": 2})
    store.close()
    again = StateStore(tmp_path, background_sync=False)
    again.save({"n": 3})  # without an explicit load: must not be shadowed by the older slots
    assert StateStore(tmp_path, background_sync=False).load() == {"n": 3}


def test_torn_newest_slot_falls_back_to_the_acknowledged_state(tmp_path, store):
    store.save({"n": 1})
    store.save({"n": 2})
    newest = store.path
    raw = newest.read_text()
    newest.write_text(raw[: len(raw) // 2])  # a write cut short by a crash
    assert StateStore(tmp_path, background_sync=False).load() == {"n": 1}


@pytest.mark.parametrize("mangle, message", [
    (lambda doc: json.dumps({**doc, "data": {"n": 99}}), "checksum mismatch"),
    (lambda doc: json.dumps({**doc, "version": 99}), "format version 99"),
    (lambda doc: json.dumps({"data": {}}), "lacks version/seq/data/checksum"),
])
def test_altered_checkpoints_are_refused(tmp_path, store, mangle, message):
    store.save({"n": 1})
    store.save({"n": 2})
    doc = json.loads(store.path.read_text())
    store.path.write_text(mangle(doc))
    with pytest.raises(StateError) as err:
        StateStore(tmp_path, background_sync=False).load()
    assert message in str(err.value) and "delete" in str(err.value)


def test_no_whole_slot_is_refused(tmp_path, store):
    store.save({"n": 1})
    store.path.write_text("{not json")
    with pytest.raises(StateError, match="no whole checkpoint"):
        StateStore(tmp_path, background_sync=False).load()
