"""The node's cpuset recorder log, parsed: identities carried onto updates, Go's times, no cpuset as every CPU."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from cci_conformance.kind.cluster import cpuset_log

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


def test_parse_keeps_identity_on_updates_and_reads_nanosecond_times():
    records = _log(_line("create", "a", "0-7", pod="s", at=1), _line("update", "a", "0-1,4", at=2))
    assert records[1].pod == "s" and records[1].cpus == frozenset({0, 1, 4})
    assert records[1].time == T0 + timedelta(seconds=2, microseconds=123456)


def test_a_create_without_cpuset_means_every_cpu():
    records = _log(_line("create", "g1", "2-3", pod="g"), _line("create", "s1", "", pod="s"),
                   _line("update", "s1", "", at=1))
    assert records[0].cpus == frozenset({2, 3})
    assert records[1].cpus is cpuset_log.EVERY_CPU
    # an update with an empty set changes nothing: it is an empty set, never "every CPU"
    assert records[2].cpus == frozenset() and records[2].pod == "s"


def test_a_start_is_no_cpuset_change():
    # The recorder logs a container's start (the CCI session settles pods from it); it must never read as the
    # container's cpuset becoming empty.
    records = _log(_line("create", "a", "0-7", pod="s"), _line("start", "a", at=1), _line("update", "a", "2", at=2))
    assert [(r.op, r.cpus) for r in records] == [("create", frozenset(range(8))), ("update", frozenset({2}))]
