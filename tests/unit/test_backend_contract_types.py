"""The contract's value types refuse a missing or mistyped field, and a session must declare its hooks."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from cci_conformance.backends.base import ContractError, missing_feature
from cci_conformance.node.api import NodeSnapshot, OwedRemove, PersistedState, SnapshotError
from cci_conformance.node.codec import snapshot_from_json, snapshot_to_json
from cci_conformance.node.persisted import persisted_state

OWED = OwedRemove(driver="d", pod_uid="p", container="c", container_id="f" * 64, why="admission")


def full(**changes) -> dict:
    fields = dict(mode="coexistence", online=frozenset({0, 1}), reserved=frozenset(), shared_pool=frozenset({1}),
                  exclusive={"p/c": frozenset({0})}, containers=(), drivers=("d",), node_generation=1,
                  policy="static", withheld={}, pending=(OWED,), startup=("started",), refused={}, registrations=1)
    fields.update(changes)
    return fields


def test_a_full_snapshot_round_trips_through_the_control_api():
    snap = NodeSnapshot(**full())
    assert snapshot_from_json(snapshot_to_json(snap)) == snap
    assert str(snap.pending[0]) == "admission: d p/c (ffffffffffff)"


@pytest.mark.parametrize("name", ["pending", "withheld", "refused", "policy", "registrations", "startup"])
def test_a_snapshot_without_a_field_is_refused(name):
    fields = full()
    del fields[name]
    with pytest.raises(TypeError, match=name):
        NodeSnapshot(**fields)
    wire = json.loads(snapshot_to_json(NodeSnapshot(**full())))
    del wire[name]
    with pytest.raises(SnapshotError, match=name):
        snapshot_from_json(json.dumps(wire))


@pytest.mark.parametrize("changes, named", [
    ({"pending": None}, "pending"),
    ({"pending": ("admission: d p/c",)}, "pending"),  # the old untyped lines
    ({"withheld": {"p/c": [1]}}, "withheld"),
    ({"policy": ""}, "policy"),
    ({"registrations": "1"}, "registrations"),
])
def test_a_mistyped_field_is_refused(changes, named):
    with pytest.raises(SnapshotError, match=named):
        NodeSnapshot(**full(**changes))


def test_persisted_state_needs_both_checkpoints():
    with pytest.raises(SnapshotError, match="cpu_manager_state"):
        persisted_state({"cci_manager_state": b"{}"})
    with pytest.raises(SnapshotError, match="cci_manager_state"):
        persisted_state({"cpu_manager_state": b"{}"})
    with pytest.raises(SnapshotError, match="pending"):
        PersistedState(cpu_manager_state=b"{}", cci_content="{}", pending=None)


def test_missing_feature_names_the_backend_and_the_hook():
    offers = SimpleNamespace(backend_name="embedded", features=frozenset({"driver-pause"}))
    lacks = SimpleNamespace(backend_name="kind", features=frozenset())
    assert missing_feature(offers, "driver-pause") == ""
    assert missing_feature(lacks, "driver-pause") == ("backend kind cannot hold the driver mid-answer "
                                                      "(SIGSTOP/SIGCONT) (driver-pause)")
    with pytest.raises(ValueError, match="unknown backend feature"):
        missing_feature(offers, "teleport")


def test_a_session_that_declares_no_features_is_a_contract_error_not_a_waiver():
    with pytest.raises(ContractError, match="features"):
        missing_feature(SimpleNamespace(backend_name="x", pause_driver=lambda: None), "driver-pause")
