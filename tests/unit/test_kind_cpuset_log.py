"""The node's cpuset recorder log, parsed: identities carried onto updates, Go's times, no cpuset as every CPU."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

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
    return cpuset_log.parse("".join(line + "\n" for line in lines))  # the recorder ends every line


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


def test_a_line_still_being_appended_is_left_for_the_next_read():
    # A reader may see the recorder's one write in part (the file grows a page at a time): the kind
    # certification of 2026-12-07 failed ROBUST-003 on such a read ("Unterminated string").
    whole = _line("create", "a", "0-7", pod="s") + "\n"
    partial = _line("update", "a", "0-1")[:29]
    assert [r.op for r in cpuset_log.parse(whole + partial)] == ["create"]
    assert cpuset_log.complete(whole + partial) == whole
    assert cpuset_log.parse(partial) == []


def test_a_whole_line_that_is_not_json_is_an_error_naming_the_line_and_the_fix():
    text = _line("create", "a", "0-7") + "\n" + '{"op": "upd\n'
    with pytest.raises(cpuset_log.RecorderLogError, match=r"cci-cpusets.jsonl line 2 .*rebuild the image"):
        cpuset_log.parse(text)
    with pytest.raises(cpuset_log.RecorderLogError, match="line 1 is not a JSON object"):
        cpuset_log.entries("[1, 2]\n")
