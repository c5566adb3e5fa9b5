"""The checker (protocol/semantics.py) gives the exhaustive oracle's verdict on random claims, states and replies."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spec_oracle import Oracle

from cci_conformance.protocol.semantics import GroupReply, check_admission, group_is_satisfiable
from cci_conformance.topology import library
from cci_conformance.topology.spec import parse_spec


def _machine(name: str, packages: list, tpc: int | None = None, devices=()) -> object:
    data = {"vendor": "intel", "packages": packages, "devices": list(devices)}
    if tpc:
        data["threads_per_core"] = tpc
    return parse_spec(data, f"<{name}>", name)


# Small machines (<= 16 CPUs) whose shapes cover every rule: SMT2 on two nodes, SMT4, hybrid cores on two
# nodes, three nodes without SMT, and the library's laptop and its sparse machine with offline CPUs.
MACHINES = [
    library.load("laptop-1s4c-smt2"),
    library.load("sparse-offline"),
    _machine("two-nodes-smt2", [{"count": 2, "nodes": [{"cores": 4, "memory": "8G"}]}], 2,
             [{"bdf": "0000:17:00.0", "class": "nic", "node": 0}, {"bdf": "0000:b1:00.0", "class": "nic", "node": 1}]),
    _machine("one-node-smt4", [{"nodes": [{"cores": 4, "memory": "8G"}]}], 4,
             [{"bdf": "0000:17:00.0", "class": "nic", "node": 0}]),
    _machine("hybrid-two-nodes", [{"count": 2, "nodes": [{"memory": "8G", "cores": [
        {"type": "p", "count": 2, "threads": 2}, {"type": "e", "count": 3, "threads": 1}]}]}], None,
             [{"bdf": "0000:b1:00.0", "class": "gpu", "node": 1}]),
    _machine("three-nodes-nosmt", [{"count": 3, "nodes": [{"cores": 4, "memory": "8G"}]}], 1,
             [{"bdf": "0000:17:00.0", "class": "nic", "node": 2}]),
]
CPU = [["EXCLUSIVE"], ["SHARED"], [], ["EXCLUSIVE", "CORE-SIBLING-PREFERRED"],
       ["SHARED", "CORE-SIBLING-PREFERRED"], ["EXCLUSIVE", "CORE-SIBLING-REQUIRED"],
       ["SHARED", "CORE-SIBLING-REQUIRED"], ["EXCLUSIVE", "CORE-SIBLING-DENIED"]]
MEM = ["NO-MEM-AFFINITY", "NUMA-MEM-AFFINITY-BIND-REQUIRED", "NUMA-MEM-AFFINITY-BIND-PREFERRED",
       "NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED", "NUMA-MEM-AFFINITY-INTERLEAVE-PREFERRED"]
AFFINITY = ["NUMA-DEVICE-AFFINITY-REQUIRED", "NUMA-DEVICE-AFFINITY-PREFERRED"]
REPLIES = 40  # replies judged per drawn state and claim (plus every reply of the oracle's choice below)


@st.composite
def cases(draw):
    t = draw(st.sampled_from(MACHINES))
    online = sorted(t.online_cpus)
    busy = draw(st.frozensets(st.sampled_from(online), max_size=len(online) // 2))
    held = draw(st.frozensets(st.sampled_from(sorted(busy)), max_size=len(busy))) if busy else frozenset()
    cpu = draw(st.sampled_from(CPU))
    tpc = t.threads_per_core
    lo = draw(st.integers(1, 6))
    hi = lo + draw(st.sampled_from([0, 0, 0, 1, 2]))
    if "CORE-SIBLING-REQUIRED" in cpu and not any(k % tpc == 0 for k in range(lo, hi + 1)):
        lo, hi = tpc * lo, tpc * hi  # S2.10: the drivers' refusal, not the checker's business
    mem = draw(st.sampled_from(MEM))
    devices = [d.bdf for d in t.pci_devices if d.numa_node in t.node_cpus]
    device = "NO-DEVICE-AFFINITY"
    if devices and draw(st.booleans()):
        device = {"affinity": draw(st.sampled_from(AFFINITY)), "device": draw(st.sampled_from(devices))}
        if mem.endswith("INTERLEAVE-REQUIRED") and device["affinity"].endswith("REQUIRED"):
            device["affinity"] = AFFINITY[1]  # S2.10 contradiction
    params = {"cores": [str(lo) if lo == hi else f"{lo}-{hi}"], "cpu attributes": [cpu], "mem attributes": [mem],
              "device attributes": [device]}
    if not cpu:
        del params["cpu attributes"]  # an absent array: its defaults (S2.1)
    return t, params, t.online_cpus - busy, held, draw(st.randoms(use_true_random=False))


def checker_verdict(t, params, available, held, cpus, exclusive) -> list[str]:
    found = check_admission(json.dumps(params), t, available, [GroupReply(frozenset(cpus), exclusive)],
                            rset_cpuset=frozenset(cpus), rset_exclusive=exclusive, held_by_others=held)
    return [str(v) for v in found]


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_the_checker_agrees_with_the_oracle(case):
    t, params, available, held, rng = case
    oracle = Oracle(t, params, available, held)
    replies = []
    for size in range(oracle.lo, min(oracle.hi, len(oracle.free)) + 1):
        hard = oracle.candidates(size)  # the interesting ones: preferences decide between them
        replies += [(s, oracle.exclusive) for s in rng.sample(hard, min(len(hard), REPLIES))]
    online = sorted(t.online_cpus)
    for _ in range(REPLIES // 4):  # and some that break a hard rule (count, availability, flag, node)
        pick = frozenset(rng.sample(online, min(len(online), rng.randint(oracle.lo, oracle.hi))))
        replies.append((pick, rng.random() < 0.9 and oracle.exclusive))
    for cpus, exclusive in replies:
        found = checker_verdict(t, params, available, held, cpus, exclusive)
        assert (not found) == oracle.acceptable(cpus, exclusive), (
            f"{t.name}: {json.dumps(params)} available={sorted(available)} held={sorted(held)} reply={sorted(cpus)} "
            f"exclusive={exclusive}: checker says {found or 'acceptable'}, the oracle the opposite")
    assert group_is_satisfiable(t, available, params) == oracle.satisfiable(), (t.name, params, sorted(available))


@pytest.mark.parametrize("t", MACHINES, ids=lambda t: t.name)
def test_the_oracle_accepts_only_what_it_must(t):
    """The oracle itself is not vacuous: on an idle machine a packed grant is acceptable and a scattered one not."""
    tpc = t.threads_per_core
    if tpc < 2:
        pytest.skip("no core has siblings")
    n = 2 * tpc
    oracle = Oracle(t, {"cores": [str(n)], "cpu attributes": [["EXCLUSIVE"]]}, t.online_cpus)
    whole = [c for c in t.cores if len(c) == tpc]
    packed = frozenset().union(*whole[:2])
    scattered = frozenset(min(c) for c in t.cores[:n]) if len(t.cores) >= n else None
    assert oracle.acceptable(packed, True) and not oracle.acceptable(packed, False)
    if scattered is not None and len(scattered) == n and oracle.split_cores(scattered) > 1:
        assert not oracle.acceptable(scattered, True)
