"""Table tests of the CPU selection, with cases ported from the kubelet's cpu_assignment_test.go.

The topologies are the kubelet's test topologies (policy_test.go), including the counts the kubelet's
fixtures leave unset (NumNUMANodes 0 on several): those counts decide the NUMA-first/socket-first order.
Inputs and expected sets are the kubelet's; the test code is ours.
"""

from __future__ import annotations

import pytest

from cci_conformance.cpuset import format_cpulist, parse_cpulist
from cci_conformance.node.cpumanager.assignment import (
    SPREAD,
    AllocationError,
    _Accumulator,
    take_by_topology_numa_packed,
)
from cci_conformance.node.cpumanager.distributed import take_by_topology_numa_distributed
from cci_conformance.node.cpumanager.topology import CPUInfo, CPUTopology, build_cpu_topology


def _topo(n, rule, *, sockets, cores, numa, uncore=0, name=""):
    info = {c: CPUInfo(*rule(c)) for c in range(n)}  # rule -> (numa, socket, core, uncore)
    return build_cpu_topology(
        info, num_cpus=n, num_sockets=sockets, num_cores=cores, num_numa_nodes=numa, num_uncore_caches=uncore, name=name
    )


_TRIPLE_SOCKET = {0: 1, 1: 1, 2: 1, 3: 0, 4: 0, 5: 0, 6: 2, 7: 2, 8: 2}  # core -> socket (topoTripleSocketHT)

TOPOS: dict[str, CPUTopology] = {
    "SingleSocketHT": _topo(8, lambda c: (0, 0, c % 4, 0), sockets=1, cores=4, numa=0),
    "DualSocketHT": _topo(12, lambda c: (c % 2, c % 2, c % 6, 0), sockets=2, cores=6, numa=0, uncore=1),
    "DualSocketNoHT": _topo(8, lambda c: (c // 4, c // 4, c, 0), sockets=2, cores=8, numa=2),
    "TripleSocketHT": _topo(
        18, lambda c: (_TRIPLE_SOCKET[c // 2], _TRIPLE_SOCKET[c // 2], c // 2, 0), sockets=3, cores=9, numa=0
    ),
    "DualSocketMultiNumaPerSocketHT": _topo(
        80, lambda c: ((c % 40) // 10, (c % 40) // 20, c % 40, 0), sockets=2, cores=40, numa=4
    ),
    "MultiSocketDualSocketPerNumaHT": _topo(
        80, lambda c: ((c % 40) // 20, (c % 40) // 10, c % 40, 0), sockets=4, cores=40, numa=2
    ),
    "DualSocketMultiNumaPerSocketHTLarge": _topo(
        256, lambda c: ((c % 128) // 16, (c % 128) // 64, c % 128, 0), sockets=2, cores=128, numa=8
    ),
    "UncoreDualSocketNoSMT": _topo(16, lambda c: (0, c // 8, c, c // 4), sockets=2, cores=16, numa=0, uncore=4),
    "UncoreSingleSocketMultiNuma": _topo(16, lambda c: (c // 8, 0, c, c // 4), sockets=1, cores=16, numa=0, uncore=4),
    "UncoreSingleSocketSMT": _topo(16, lambda c: (0, 0, c % 8, (c % 8) // 4), sockets=1, cores=8, numa=0, uncore=2),
    "UncoreSingleSocketNoSMT": _topo(16, lambda c: (0, 0, c, c // 4), sockets=1, cores=16, numa=0, uncore=4),
}


def cpus(text: str) -> frozenset[int]:
    return parse_cpulist(text)


def acc(topo: str, available: str, num: int = 0) -> _Accumulator:
    return _Accumulator(TOPOS[topo], cpus(available), num, "packed")


# ---- TestCPUAccumulatorFreeSockets (the kubelet sorts the result before comparing) ----
@pytest.mark.parametrize(
    "topo,available,expect",
    [
        ("SingleSocketHT", "0-7", [0]),
        ("SingleSocketHT", "1-7", []),
        ("DualSocketHT", "0-11", [0, 1]),
        ("DualSocketHT", "0-9,11", [1]),
        ("DualSocketHT", "0,2-9,11", []),
        ("DualSocketMultiNumaPerSocketHT", "0-79", [0, 1]),
        ("DualSocketMultiNumaPerSocketHT", "1-79", [1]),
        ("DualSocketMultiNumaPerSocketHT", "1-78", []),
        ("MultiSocketDualSocketPerNumaHT", "0-79", [0, 1, 2, 3]),
        ("MultiSocketDualSocketPerNumaHT", "0-19,21-79", [0, 1, 3]),
        ("MultiSocketDualSocketPerNumaHT", "0-59,61-78", [0, 1]),
        ("MultiSocketDualSocketPerNumaHT", "1-19,21-38,41-60,61-78", [1]),
        ("MultiSocketDualSocketPerNumaHT", "0-40,42-49,51-68,71-79", []),
    ],
)
def test_free_sockets(topo, available, expect):
    assert sorted(acc(topo, available).free_sockets()) == expect


# ---- TestCPUAccumulatorFreeNUMANodes (order matters) ----
@pytest.mark.parametrize(
    "topo,available,expect",
    [
        ("SingleSocketHT", "0-7", [0]),
        ("SingleSocketHT", "1-7", []),
        ("DualSocketHT", "0-11", [0, 1]),
        ("DualSocketHT", "0-9,11", [1]),
        ("DualSocketHT", "0,2-9,11", []),
        ("DualSocketMultiNumaPerSocketHT", "0-79", [0, 1, 2, 3]),
        ("DualSocketMultiNumaPerSocketHT", "1-79", [1, 2, 3]),
        ("DualSocketMultiNumaPerSocketHT", "1-9,11-79", [2, 3]),
        ("DualSocketMultiNumaPerSocketHT", "1-9,11-59,61-79", [3]),
        ("DualSocketMultiNumaPerSocketHT", "1-9,11-59,61-78", []),
        ("MultiSocketDualSocketPerNumaHT", "0-79", [0, 1]),
        ("MultiSocketDualSocketPerNumaHT", "0-9,11-79", [1]),
        ("MultiSocketDualSocketPerNumaHT", "0-9,11-59,61-79", []),
    ],
)
def test_free_numa_nodes(topo, available, expect):
    assert acc(topo, available).free_numa_nodes() == expect


@pytest.mark.parametrize(
    "available,sockets,numas",
    [
        ("0-79", [0, 1], [0, 1, 2, 3]),
        ("1-79", [1], [1, 2, 3]),
        ("1-9,11-79", [1], [2, 3]),
        ("1-59,61-79", [], [1, 3]),
    ],
)
def test_free_sockets_and_numa_nodes(available, sockets, numas):
    a = acc("DualSocketMultiNumaPerSocketHT", available)
    assert a.free_numa_nodes() == numas
    assert a.free_sockets() == sockets


# ---- TestCPUAccumulatorFreeCores / FreeCPUs (orders are the best-fit sort) ----
@pytest.mark.parametrize(
    "topo,available,expect",
    [
        ("SingleSocketHT", "0-7", [0, 1, 2, 3]),
        ("SingleSocketHT", "0-2,4-6", [0, 1, 2]),
        ("SingleSocketHT", "0-6", [0, 1, 2]),
        ("SingleSocketHT", "", []),
        ("SingleSocketHT", "0-3", []),
        ("DualSocketHT", "0-11", [0, 2, 4, 1, 3, 5]),
        ("DualSocketHT", "1-5,7-11", [2, 4, 1, 3, 5]),
        ("DualSocketHT", "2-5,8-11", [2, 4, 3, 5]),
    ],
)
def test_free_cores(topo, available, expect):
    assert acc(topo, available).free_cores() == expect


@pytest.mark.parametrize(
    "topo,available,expect",
    [
        ("SingleSocketHT", "0-7", [0, 4, 1, 5, 2, 6, 3, 7]),
        ("SingleSocketHT", "3-7", [4, 5, 6, 3, 7]),
        ("DualSocketHT", "0-11", [0, 6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11]),
        ("DualSocketHT", "1-11", [6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11]),
        ("DualSocketHT", "1-5,7-11", [2, 8, 4, 10, 1, 7, 3, 9, 5, 11]),
        ("TripleSocketHT", "0-3,6-13", [12, 13, 0, 1, 2, 3, 6, 7, 8, 9, 10, 11]),
    ],
)
def test_free_cpus_order(topo, available, expect):
    assert acc(topo, available).sorted_cpus() == expect


@pytest.mark.parametrize(
    "available,takes,num,satisfied,failed",
    [
        ("0-7", [""], 1, False, False),
        ("", [""], 1, False, True),
        ("0-7", ["0"], 1, True, False),
        ("0-7", ["0"], 2, False, False),
        ("0-2", ["0", "1"], 4, False, True),
        ("0-7", ["0", "1", "2", "3", "4", "5", "6", "7"], 8, True, False),
    ],
)
def test_accumulator_take(available, takes, num, satisfied, failed):
    a = acc("SingleSocketHT", available, num)
    for t in takes:
        a.take(cpus(t))
    assert a.satisfied() is satisfied
    assert a.failed() is failed
    for t in takes:
        assert not cpus(t) & a.details.cpus()
        assert cpus(t) <= a.result
    assert a.needed == num - sum(len(cpus(t)) for t in takes)


NOT_ENOUGH_5_OF_4 = "not enough cpus available to satisfy request: requested=5, available=4"

# ---- commonTakeByTopologyTestCases: shared by packed and distributed (group size 1) ----
COMMON = [
    ("more than available", "SingleSocketHT", "0,2,4,6", 5, NOT_ENOUGH_5_OF_4, ""),
    ("zero cpus", "SingleSocketHT", "0-7", 0, "", ""),
    ("one cpu", "SingleSocketHT", "0-7", 1, "", "0"),
    ("one cpu, some taken", "SingleSocketHT", "1,3,5-7", 1, "", "6"),
    ("two cpus", "SingleSocketHT", "0-7", 2, "", "0,4"),
    ("all cpus", "SingleSocketHT", "0-7", 8, "", "0-7"),
    ("two cpus, one core free", "SingleSocketHT", "0-3,6", 2, "", "2,6"),
    ("a socket, dual socket HT", "DualSocketHT", "0-11", 6, "", "0,2,4,6,8,10"),
    ("a socket, multi-numa", "DualSocketMultiNumaPerSocketHT", "0-79", 40, "", "0-19,40-59"),
    ("a NUMA node, multi-numa", "DualSocketMultiNumaPerSocketHT", "0-79", 20, "", "0-9,40-49"),
    ("a NUMA node, one NUMA taken", "DualSocketMultiNumaPerSocketHT", "10-39,50-79", 20, "", "10-19,50-59"),
    ("a socket and a NUMA node", "DualSocketMultiNumaPerSocketHT", "0-79", 60, "", "0-29,40-69"),
    ("a socket and a NUMA node, a core taken", "DualSocketMultiNumaPerSocketHT", "1-39,41-79", 60, "", "10-39,50-79"),
]

PACKED_ONLY = [
    ("one cpu, core from socket 0", "DualSocketHT", "1-5,7-11", 1, False, "2"),
    ("4 cores: 3 from NUMA 0, 1 from NUMA 1", "DualSocketHT", "0-11", 8, False, "0-2,4,6-8,10"),
    ("32 cores: 30 from 3 NUMA nodes, 2 from the 4th", "DualSocketMultiNumaPerSocketHT", "0-79", 64, False,
     "0-31,40-71"),
    ("uncore: two full caches and part of one", "UncoreSingleSocketNoSMT", "1-15", 10, True, "1-2,4-11"),
    ("uncore: one cpu, dual socket HT", "DualSocketHT", "1-5,7-11", 1, True, "1"),
    ("uncore: first cache of first socket", "UncoreDualSocketNoSMT", "0-15", 4, True, "0-3"),
    ("uncore: all available of first socket", "UncoreDualSocketNoSMT", "2-15", 6, True, "2-7"),
    ("uncore: first cache of second socket", "UncoreDualSocketNoSMT", "8-15", 4, True, "8-11"),
    ("uncore: first cache of available NUMA", "UncoreSingleSocketMultiNuma", "3-8,12", 2, True, "4-5"),
    ("uncore: best cache group, SMT", "UncoreSingleSocketSMT", "2-7,10-15", 6, True, "4-6,12-14"),
    ("uncore: several caches, SMT", "UncoreSingleSocketSMT", "1-7,9-15", 10, True, "1,4-7,9,12-15"),
]


@pytest.mark.parametrize("desc,topo,available,num,err,expect", COMMON, ids=[c[0] for c in COMMON])
def test_packed_common(desc, topo, available, num, err, expect):
    if err:
        with pytest.raises(AllocationError) as e:
            take_by_topology_numa_packed(TOPOS[topo], cpus(available), num)
        assert str(e.value) == err
    else:
        assert format_cpulist(take_by_topology_numa_packed(TOPOS[topo], cpus(available), num)) == expect


@pytest.mark.parametrize("desc,topo,available,num,uncore,expect", PACKED_ONLY, ids=[c[0] for c in PACKED_ONLY])
def test_packed(desc, topo, available, num, uncore, expect):
    got = take_by_topology_numa_packed(TOPOS[topo], cpus(available), num, prefer_align_by_uncore_cache=uncore)
    assert format_cpulist(got) == expect


SPREAD_CASES = [
    ("SingleSocketHT", "0-7", 3, "0-2"),
    ("DualSocketHT", "0-11", 2, "0,2"),
    ("DualSocketHT", "0-11", 3, "0,2,4"),
    ("DualSocketHT", "0-11", 6, "0,2,4,6,8,10"),
    ("DualSocketHT", "0-11", 8, "0-4,6,8,10"),
    ("DualSocketNoHT", "0-7", 2, "0-1"),
    ("DualSocketMultiNumaPerSocketHT", "0-79", 8, "0-7"),
]


@pytest.mark.parametrize("topo,available,num,expect", SPREAD_CASES)
def test_spread_sorting(topo, available, num, expect):
    got = take_by_topology_numa_packed(TOPOS[topo], cpus(available), num, sorting=SPREAD)
    assert format_cpulist(got) == expect


M = "DualSocketMultiNumaPerSocketHT"
DISTRIBUTED = [
    ("4 cores, 2 per NUMA node", "DualSocketHT", "0-11", 8, 1, "0-3,6-9"),
    ("32 cores, 8 per NUMA node", M, "0-79", 64, 1, "0-7,10-17,20-27,30-37,40-47,50-57,60-67,70-77"),
    ("24 cores over the first 3 NUMA nodes", M, "0-79", 48, 1, "0-7,10-17,20-27,40-47,50-57,60-67"),
    ("24 cores, all but 2 from NUMA 0", M, "1-29,32-39,41-69,72-79", 48, 1, "1-8,10-17,20-27,41-48,50-57,60-67"),
    ("24 cores over the last 3 NUMA nodes", M, "2-29,31-39,42-69,71-79", 48, 1, "10-17,20-27,31-38,50-57,60-67,71-78"),
    ("8 cores, 2 per NUMA node", M, "0-2,10-12,20-22,30-32,40-41,50-51,60-61,70-71", 16, 1,
     "0-1,10-11,20-21,30-31,40-41,50-51,60-61,70-71"),
    ("one cpu, socket 0 core", "DualSocketHT", "1-5,7-11", 1, 1, "1"),
    ("one cpu, group size 2 falls back to packed", "DualSocketHT", "1-5,7-11", 1, 2, "2"),
    ("13 cores over the first 2 NUMA nodes", M, "0-79", 26, 1, "0-6,10-16,40-45,50-55"),
    ("13 cores over the first 2 NUMA nodes, group 2", M, "0-79", 26, 2, "0-6,10-15,40-46,50-55"),
    ("31 cores, spill to NUMA 0,1", M, "0-79", 62, 1, "0-7,10-17,20-27,30-37,40-47,50-57,60-66,70-76"),
    ("31 cores, spill to NUMA 0,1,2, group 2", M, "0-79", 62, 2, "0-7,10-17,20-27,30-36,40-47,50-57,60-67,70-76"),
    ("31 cores, spill to NUMA 2,3 for balance", M, "0-8,10-18,20-39,40-48,50-58,60-79", 62, 1,
     "0-7,10-17,20-27,30-37,40-46,50-56,60-67,70-77"),
    ("31 cores, spill to NUMA 0,2,3, group 2", M, "0-8,10-18,20-39,40-48,50-58,60-79", 62, 2,
     "0-7,10-16,20-27,30-37,40-47,50-56,60-67,70-77"),
    ("bestRemainder has enough CPUs", M, "0-3,10-13,20-23,30-36,40-43,50-53,60-63,70-76", 34, 1,
     "0-3,10-13,20-23,30-34,40-43,50-53,60-63,70-74"),
    ("live machine regression", "DualSocketMultiNumaPerSocketHTLarge",
     "0,128,30,31,158,159,43-47,171-175,62,63,190,191,75-79,203-207,94,96,222,223,101-111,229-239,126,127,254,255",
     28, 1, "43-47,75-79,96,101-105,171-174,203-206,229-232"),
]


@pytest.mark.parametrize("desc,topo,available,num,err,expect", COMMON, ids=[c[0] for c in COMMON])
def test_distributed_common(desc, topo, available, num, err, expect):
    if err:
        with pytest.raises(AllocationError) as e:
            take_by_topology_numa_distributed(TOPOS[topo], cpus(available), num, 1)
        assert str(e.value) == err
    else:
        assert format_cpulist(take_by_topology_numa_distributed(TOPOS[topo], cpus(available), num, 1)) == expect


@pytest.mark.parametrize("desc,topo,available,num,group,expect", DISTRIBUTED, ids=[c[0] for c in DISTRIBUTED])
def test_distributed(desc, topo, available, num, group, expect):
    got = take_by_topology_numa_distributed(TOPOS[topo], cpus(available), num, group)
    assert format_cpulist(got) == expect


def test_failed_to_allocate_when_available_cpus_are_outside_the_topology():
    # CPUs the topology does not know are counted in "available" but can never be taken.
    expected = "^not enough cpus available to satisfy request: requested=3, available=4$"
    with pytest.raises(AllocationError, match=expected):
        take_by_topology_numa_packed(TOPOS["SingleSocketHT"], cpus("0-1,100-101"), 3)


def test_free_cores_never_hands_out_a_busy_sibling_on_a_hybrid_part():
    """On hybrid-8p8e the kubelet's CPUsPerCore is 1; a half-used P-core must not count as free."""
    from cci_conformance.node.cpumanager import from_model, take_by_topology_numa_packed
    from cci_conformance.topology import library

    model = library.load("hybrid-8p8e")
    topo = from_model(model)
    busy = min(model.cores, key=min)  # a P-core: two threads
    assert len(busy) == 2
    taken = sorted(busy)[0]
    available = model.online_cpus - {taken}
    for n in range(1, 6):
        got = take_by_topology_numa_packed(topo, available, n)
        assert got <= available, f"n={n}: handed out unavailable CPUs {sorted(got - available)}"
        assert len(got) == n


def test_free_cores_is_the_kubelet_test_on_homogeneous_machines():
    """Where every core has the same thread count, 'own size' and CPUsPerCore agree."""
    from cci_conformance.node.cpumanager import from_model
    from cci_conformance.topology import library

    for name in ("server-2s8c-smt2-intel", "smt4-2s", "server-2s-nosmt"):
        model = library.load(name)
        topo = from_model(model)
        assert {len(c) for c in model.cores} == {topo.cpus_per_core}, name
