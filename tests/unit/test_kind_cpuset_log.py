"""The node's cpuset recorder log: parsing, and its replay against grants."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from cci_conformance.kind.cluster import cpuset_log
from cci_conformance.kind.cluster.cpuset_log import Grant, Replay

T0 = datetime(2026, 12, 1, 22, 0, tzinfo=UTC)


def _line(op, cid, cpus="", *, pod="", ctr="c0", kind="container", ns="default", at=0):
    # The recorder writes Go's RFC3339Nano: nine fractional digits.
    stamp = T0 + timedelta(seconds=at)
    raw = {"op": op, "id": cid, "cpus": cpus, "time": stamp.strftime("%Y-%m-%dT%H:%M:%S") + ".123456789Z"}
    if op == "create":
        raw.update({"container-type": kind, "container-name": ctr, "sandbox-name": pod, "sandbox-namespace": ns})
    return json.dumps(raw)


def _log(*lines):
    return cpuset_log.parse("\n".join(lines))


GRANT = Grant("g-c0", "default", "g", "c0", frozenset({2, 3}))


def test_parse_keeps_identity_on_updates_and_reads_nanosecond_times():
    records = _log(_line("create", "a", "0-7", pod="s", at=1), _line("update", "a", "0-1,4", at=2))
    assert records[1].pod == "s" and records[1].cpus == frozenset({0, 1, 4})
    assert records[1].time == T0 + timedelta(seconds=2, microseconds=123456)


def test_a_create_without_cpuset_means_every_cpu_and_overlaps_the_grant():
    records = _log(_line("create", "g1", "2-3", pod="g"), _line("create", "s1", "", pod="s"))
    assert records[1].cpus is cpuset_log.EVERY_CPU
    violations = Replay([GRANT]).run(records)
    assert [(v.container[1], v.overlap, v.claimed) for v in violations] == [("s", frozenset({2, 3}), False)]
    assert "no cpuset (every CPU)" in violations[0].describe()


def test_shared_container_updated_off_the_grant_before_its_create_passes():
    # The driver updates shared containers before the claimed container is created (NRI CreateContainer).
    records = _log(_line("create", "s1", "0-7", pod="s"), _line("update", "s1", "0-1,4-7"),
                   _line("create", "g1", "2-3", pod="g"))
    assert Replay([GRANT]).run(records) == []


def test_shared_update_onto_a_live_grant_is_caught_after_a_container_restart():
    records = _log(_line("create", "s1", "0-7", pod="s"), _line("update", "s1", "0-1,4-7"),
                   _line("create", "g1", "2-3", pod="g"), _line("update", "s1", "0-7"),
                   _line("create", "g2", "2-3", pod="g"))
    violations = Replay([GRANT]).run(records)
    assert [(v.index, v.container_id) for v in violations] == [(3, "s1")]


def test_grant_ended_and_gone_containers_and_sandboxes_are_not_counted():
    records = _log(_line("create", "old", "0-7", pod="o", at=0), _line("create", "g1", "2-3", pod="g", at=2),
                   _line("create", "p", "", pod="x", kind="sandbox", at=3), _line("create", "s2", "0-7", pod="s", at=9))
    ended = Grant("g-c0", "default", "g", "c0", frozenset({2, 3}), end=3)
    assert Replay([ended], gone={"old": T0 + timedelta(seconds=1)}).run(records) == []
    # Without the end and the gone time both are overlaps; the sandbox never is.
    assert {v.container_id for v in Replay([GRANT]).run(records)} == {"old", "s2"}


def test_two_claims_overlapping_are_claimed_violations():
    other = Grant("h-c0", "default", "h", "c0", frozenset({3, 4}))
    records = _log(_line("create", "g1", "2-3", pod="g"), _line("create", "h1", "3-4", pod="h"))
    violations = Replay([GRANT, other]).run(records)
    assert violations and all(v.claimed for v in violations)


def test_replay_from_an_offset_keeps_only_containers_alive_at_the_start():
    records = _log(_line("create", "dead", "0-7", pod="d"), _line("create", "live", "0-1", pod="l"),
                   _line("create", "g1", "2-3", pod="g"))
    assert Replay([GRANT]).run(records, start=2, live_before={"live"}) == []
    assert [v.container_id for v in Replay([GRANT]).run(records, start=2, live_before={"live", "dead"})] == ["dead"]


def test_gone_from_checkpoints_bounds_only_containers_created_before():
    records = _log(_line("create", "a", "0", pod="a", at=0), _line("create", "b", "0", pod="b", at=10))
    gone = cpuset_log.gone_from_checkpoints(records, [(T0 + timedelta(seconds=5), set())])
    assert gone == {"a": T0 + timedelta(seconds=5)}


def test_creates_of_and_last_cpus():
    records = _log(_line("create", "g1", "2-3", pod="g"), _line("update", "g1", "2"),
                   _line("create", "g2", "", pod="g"))
    assert [r.container_id for r in cpuset_log.creates_of(records, "default", "g", "c0")] == ["g1", "g2"]
    assert cpuset_log.last_cpus(records, "g1") == frozenset({2})
    assert cpuset_log.last_cpus(records, "g2") is None

