"""The independent checker flags each broken rule of docs/spec.md section 2, and only that rule."""

from __future__ import annotations

import pytest

from cci_conformance.cpuset import parse_cpulist
from cci_conformance.protocol.protos import cci_v1alpha1_pb2 as pb
from cci_conformance.protocol.semantics import (
    GroupReply,
    check_admission,
    check_response,
    group_is_satisfiable,
    withheld_cpus,
)
from cci_conformance.topology import library

# Node 0: CPUs 0-7 + siblings 16-23 (core k = {k, k+16}); node 1: 8-15 + 24-31. Device 0000:b1:00.0 on node 1.
T = library.load("server-2s8c-smt2-intel")
ALL = T.online_cpus


def claim(cores="4", cpu=("EXCLUSIVE",), mem="NO-MEM-AFFINITY", device="NO-DEVICE-AFFINITY", caps=()):
    """The parameters themselves: the checker reads them with its own reader (``caps`` is the drivers' business)."""
    return {"cores": [cores], "cpu attributes": [list(cpu)], "mem attributes": [mem], "device attributes": [device]}


def rules(c, cpus, exclusive=True, available=ALL, held=frozenset()):
    cpus = parse_cpulist(cpus)
    found = check_admission(c, T, available, [GroupReply(cpus, exclusive)], rset_cpuset=cpus,
                            rset_exclusive=exclusive, held_by_others=held)
    return sorted({v.rule for v in found})


CASES = [
    # (claim kwargs, cpuset returned, rules expected) -- a correct reply first, then one broken rule each
    (dict(), "0-1,16-17", []),
    (dict(), "0-1,16", ["S2.3"]),  # wrong count
    (dict(cpu=("EXCLUSIVE", "CORE-SIBLING-REQUIRED")), "0-1,16-17", []),
    (dict(cpu=("EXCLUSIVE", "CORE-SIBLING-REQUIRED")), "0-3", ["S2.4"]),  # half cores
    (dict(cpu=("EXCLUSIVE", "CORE-SIBLING-DENIED")), "0-3", []),
    (dict(cpu=("EXCLUSIVE", "CORE-SIBLING-DENIED")), "0-2,16", ["S2.4"]),  # two threads of core 0
    (dict(cpu=("EXCLUSIVE", "CORE-SIBLING-PREFERRED")), "0-3", ["S2.4"]),  # 4 split cores, whole ones free
    (dict(mem="NUMA-MEM-AFFINITY-BIND-REQUIRED"), "8-9,24-25", []),
    (dict(mem="NUMA-MEM-AFFINITY-BIND-REQUIRED"), "0,16,8,24", ["S2.5"]),
    (dict(mem="NUMA-MEM-AFFINITY-BIND-PREFERRED"), "0,16,8,24", ["S2.5"]),
    (dict(mem="NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED"), "0,16,8,24", []),
    (dict(mem="NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED"), "0-1,16-17", ["S2.6"]),
    (dict(mem="NUMA-MEM-AFFINITY-INTERLEAVE-PREFERRED"), "0-1,16-17", ["S2.6"]),
    (dict(device={"affinity": "NUMA-DEVICE-AFFINITY-REQUIRED", "device": "0000:b1:00.0"}), "8-9,24-25", []),
    (dict(device={"affinity": "NUMA-DEVICE-AFFINITY-REQUIRED", "device": "0000:b1:00.0"}), "0-1,16-17", ["S2.7"]),
    (dict(device={"affinity": "NUMA-DEVICE-AFFINITY-PREFERRED", "device": "0000:b1:00.0"}), "0-1,16-17", ["S2.7"]),
    (dict(cores="2-6", caps=("core-ranges",)), "0-2,16-18", []),
    (dict(cores="2-6", caps=("core-ranges",)), "0-3,16-19", ["S2.3"]),
]


@pytest.mark.parametrize("kwargs, cpus, expected", CASES)
def test_each_rule(kwargs, cpus, expected):
    assert rules(claim(**kwargs), cpus) == expected


def test_availability_and_withheld():
    c = claim()
    assert rules(c, "0-1,16-17", available=ALL - {0}) == ["S2.3"]
    assert rules(c, "0-1,16-17", held=frozenset({17})) == ["S2.9"]
    assert rules(c, "0-1,16-17", exclusive=False) == ["S2.2"]
    # DENIED siblings must have been free to withhold
    d = claim(cpu=("EXCLUSIVE", "CORE-SIBLING-DENIED"))
    assert rules(d, "0-3", available=ALL - {16}) == ["S2.4"]
    assert withheld_cpus(T, d, [GroupReply(frozenset({0, 1, 2, 3}), True)]) == frozenset({0, 1, 2, 3, 16, 17, 18, 19})
    assert withheld_cpus(T, claim(cpu=("SHARED",)), [GroupReply(frozenset({0}), False)]) == frozenset()


def test_preference_is_excused_when_it_cannot_be_met():
    busy = ALL - parse_cpulist("8-15,24-31")  # node 1 has nothing free
    c = claim(device={"affinity": "NUMA-DEVICE-AFFINITY-PREFERRED", "device": "0000:b1:00.0"})
    assert rules(c, "0-1,16-17", available=busy) == []
    fragmented = parse_cpulist("0-7")  # node 0 only, every core half-used
    p = claim(cpu=("EXCLUSIVE", "CORE-SIBLING-PREFERRED"))
    assert rules(p, "0-3", available=fragmented) == []


def test_groups_rules():
    c = {"cores": ["2", "2"], "cpu attributes": [["EXCLUSIVE"], ["SHARED"]]}
    ok = [GroupReply(frozenset({0, 16}), True), GroupReply(frozenset({1, 17}), False)]
    assert check_admission(c, T, ALL, ok, rset_cpuset=frozenset({0, 1, 16, 17}), rset_exclusive=True) == []
    overlap = [GroupReply(frozenset({0, 16}), True), GroupReply(frozenset({0, 16}), False)]
    assert {v.rule for v in check_admission(c, T, ALL, overlap)} == {"S2.2"}
    bad_union = check_admission(c, T, ALL, ok, rset_cpuset=frozenset({0, 1, 16, 17, 5}))
    assert [v.rule for v in bad_union] == ["S2.2"]
    assert [v.rule for v in check_admission(c, T, ALL, ok[:1])] == ["S2.2"]
    assert [v.rule for v in check_admission(c, T, ALL, ok, rset_exclusive=False)] == ["S2.2"]


def test_check_response_reads_proto_replies():
    c = claim()
    one = pb.AdmitResponse(rSet=pb.ResourceSet(cpuset="0-1,16-17", exclusive=True))  # no groups: read as one
    assert check_response(c, T, ALL, one) == []
    err = pb.AdmitResponse(err="no")
    assert [v.rule for v in check_response(c, T, ALL, err)] == ["S1.6"]


def test_satisfiable():
    d = claim(cores="9", cpu=("EXCLUSIVE", "CORE-SIBLING-DENIED"), mem="NUMA-MEM-AFFINITY-BIND-REQUIRED")
    assert not group_is_satisfiable(T, ALL, d)  # a node has 8 cores
    d8 = claim(cores="8", cpu=("EXCLUSIVE", "CORE-SIBLING-DENIED"), mem="NUMA-MEM-AFFINITY-BIND-REQUIRED")
    assert group_is_satisfiable(T, ALL, d8)
    assert group_is_satisfiable(T, ALL - {16}, d8)  # node 1 still has 8 whole cores
    assert not group_is_satisfiable(T, ALL - {16, 8}, d8)
    i = claim(cores="1", cpu=("SHARED",), mem="NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED")
    assert not group_is_satisfiable(T, ALL, i)
