"""The driver checkpoint: checksummed JSON, atomic writes, corrupt files refused with a clear message."""

from __future__ import annotations

import json

import pytest

from cci_conformance.driver_sdk.state import StateError, StateStore


def test_round_trip_and_no_temp_files_left(tmp_path):
    store = StateStore(tmp_path)
    assert store.load() is None
    store.save({"admissions": [{"pod": "p"}]})
    store.save({"admissions": []})
    assert store.load() == {"admissions": []}
    assert [p.name for p in tmp_path.iterdir()] == ["driver_state.json"]


@pytest.mark.parametrize("mangle, message", [
    (lambda doc: "{not json", "not valid JSON"),
    (lambda doc: json.dumps({**doc, "data": {"admissions": [1]}}), "checksum mismatch"),
    (lambda doc: json.dumps({**doc, "version": 99}), "format version 99"),
    (lambda doc: json.dumps({"data": {}}), "lacks version/data/checksum"),
])
def test_corrupt_checkpoints_are_refused(tmp_path, mangle, message):
    store = StateStore(tmp_path)
    store.save({"admissions": []})
    doc = json.loads(store.path.read_text())
    store.path.write_text(mangle(doc))
    with pytest.raises(StateError) as err:
        store.load()
    assert message in str(err.value) and str(store.path) in str(err.value) and "delete" in str(err.value)
