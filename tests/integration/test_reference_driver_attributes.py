"""The reference driver as a separate process, over its sockets only: every attribute on four library
topologies, each reply checked by the independent checker (protocol/semantics.py), not the driver's code."""

from __future__ import annotations

import random

import pytest

from cci_conformance.cpuset import format_cpulist, parse_cpulist
from cci_conformance.drivers.client import LocalDriver
from cci_conformance.drivers.manifest import load_manifest
from cci_conformance.paths import REFERENCE_DRIVER_DIR
from cci_conformance.protocol.claims import parse_claim
from cci_conformance.protocol.semantics import check_response, group_is_satisfiable, reply_groups, withheld_cpus
from cci_conformance.topology import library

pytestmark = pytest.mark.integration

TOPOLOGIES = ["server-2s-snc4", "hybrid-8p8e", "server-2s-nosmt", "smt4-2s"]
MANIFEST = load_manifest(REFERENCE_DRIVER_DIR)
CAPS = tuple(MANIFEST.capabilities)


class Node:
    """The test's own view of the node: which admissions are live and what they withhold."""

    def __init__(self, driver: LocalDriver, reserved=frozenset()):
        self.driver, self.topology, self.reserved = driver, driver.topology, frozenset(reserved)
        self.live: dict[str, tuple[str, frozenset[int]]] = {}  # container id -> (claim uid, withheld)
        self.n = 0

    @property
    def held(self) -> frozenset[int]:
        return frozenset().union(*(w for _, w in self.live.values()))

    def available(self) -> frozenset[int]:
        return self.topology.online_cpus - self.reserved - self.held

    def admit(self, params: dict, expect_ok: bool = True):
        self.n += 1
        pod, uid = f"pod-{self.n}", f"claim-{self.n}"
        available = self.available()
        reply = self.driver.client.admit(pod=pod, container="main", claim_uid=uid, claim=params, available=available)
        if not expect_ok:
            assert reply.err, f"expected a refusal for {params}, got {reply.rSet.cpuset}"
            assert not reply.HasField("rSet") and not reply.groups, "an error reply carries no resource set (S1.6)"
            return reply
        claim = parse_claim(params, self.topology, CAPS)
        violations = check_response(claim, self.topology, available, reply, held_by_others=self.held)
        assert not violations, f"{params} on {self.topology.name}: " + "; ".join(map(str, violations))
        cid = f"cid-{self.n}"
        assert self.driver.client.add(pod=pod, container="main", container_id=cid).err == ""
        self.live[cid] = (uid, withheld_cpus(self.topology, claim, reply_groups(reply)))
        return reply

    def remove(self, cid: str) -> None:
        uid, _ = self.live.pop(cid)
        assert self.driver.client.remove(claim_uid=uid, container_id=cid).err == ""

    def remove_all(self) -> None:
        for cid in list(self.live):
            self.remove(cid)


@pytest.fixture(scope="module", params=TOPOLOGIES)
def driver(request):
    with LocalDriver(MANIFEST, library.load(request.param)) as d:
        yield d


@pytest.fixture
def node(driver):
    n = Node(driver)
    yield n
    n.remove_all()


def one(cores, cpu=("EXCLUSIVE",), mem="NO-MEM-AFFINITY", device="NO-DEVICE-AFFINITY"):
    return {"cores": [str(cores)], "cpu attributes": [list(cpu)], "mem attributes": [mem],
            "device attributes": [device]}


def local_device(topology):
    return next(d.bdf for d in topology.pci_devices if d.numa_node in topology.node_cpus)


def attribute_cases(t):
    tpc, nodes = t.threads_per_core, len(t.node_cpus)
    dev = local_device(t)
    return {
        "exclusive": one(3),
        "shared": one(5, ("SHARED",)),
        "sibling-required": one(2 * tpc, ("EXCLUSIVE", "CORE-SIBLING-REQUIRED")),
        "sibling-required-shared": one(tpc, ("SHARED", "CORE-SIBLING-REQUIRED")),
        "sibling-denied": one(3, ("EXCLUSIVE", "CORE-SIBLING-DENIED")),
        "sibling-preferred": one(2 * tpc + 1, ("EXCLUSIVE", "CORE-SIBLING-PREFERRED")),
        "bind-required": one(4, mem="NUMA-MEM-AFFINITY-BIND-REQUIRED"),
        "bind-preferred": one(4, mem="NUMA-MEM-AFFINITY-BIND-PREFERRED"),
        "interleave-required": one(2 * nodes, mem="NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED"),
        "interleave-preferred": one(nodes, ("SHARED",), mem="NUMA-MEM-AFFINITY-INTERLEAVE-PREFERRED"),
        "device-required": one(2, device={"affinity": "NUMA-DEVICE-AFFINITY-REQUIRED", "device": dev}),
        "device-preferred": one(2, device={"affinity": "NUMA-DEVICE-AFFINITY-PREFERRED", "device": dev}),
        "device-bind-siblings": one(2 * tpc, ("EXCLUSIVE", "CORE-SIBLING-REQUIRED"),
                                    mem="NUMA-MEM-AFFINITY-BIND-REQUIRED",
                                    device={"affinity": "NUMA-DEVICE-AFFINITY-REQUIRED", "device": dev}),
        "range": {"cores": ["2-6"], "cpu attributes": [["EXCLUSIVE"]]},
        "groups": {"cores": ["2", "3"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-PREFERRED"], ["SHARED"]],
                   "mem attributes": ["NUMA-MEM-AFFINITY-BIND-REQUIRED", "NO-MEM-AFFINITY"],
                   "device attributes": [{"affinity": "NUMA-DEVICE-AFFINITY-REQUIRED", "device": dev},
                                         "NO-DEVICE-AFFINITY"]},
    }


CASE_NAMES = list(attribute_cases(library.load("smt4-2s")))


@pytest.mark.parametrize("case", CASE_NAMES)
def test_attribute_on_an_idle_machine(node, case):
    node.admit(attribute_cases(node.topology)[case])


@pytest.mark.parametrize("case", CASE_NAMES)
def test_attribute_on_a_busy_machine(node, case):
    """The same attributes while other exclusive and denied grants are live (availability shrinks)."""
    t = node.topology
    smallest_node_cores = min(len(c) for c in t.node_cpus.values()) // t.threads_per_core
    node.admit(one(max(1, smallest_node_cores // 2), ("EXCLUSIVE", "CORE-SIBLING-DENIED")))
    node.admit(one(3))
    node.admit(one(2, ("SHARED",)))
    params = attribute_cases(t)[case]
    claim = parse_claim(params, t, CAPS)
    feasible = len(claim.groups) > 1 or group_is_satisfiable(t, node.available(), claim.groups[0])
    node.admit(params, expect_ok=feasible)


def test_reserved_cpus_are_never_used(driver):
    t = driver.topology
    node = Node(driver, reserved=t.cores[0] | t.cores[1])
    try:
        for _ in range(4):
            reply = node.admit(one(2))
            assert parse_cpulist(reply.rSet.cpuset).isdisjoint(node.reserved)
    finally:
        node.remove_all()


def test_refusal_leaves_no_trace_and_freed_cpus_return(node):
    t = node.topology
    too_many = one(len(t.cpus) + 1)
    node.admit(too_many, expect_ok=False)
    bad = dict(one(2), **{"cpu attributes": [["EXCLUSIVE", "SHARED"]]})
    assert "contradict" in node.admit(bad, expect_ok=False).err
    everything = one(len(t.cpus))
    first = node.admit(everything)
    assert parse_cpulist(first.rSet.cpuset) == t.online_cpus
    node.admit(one(1), expect_ok=False)  # nothing left
    node.remove_all()
    again = node.admit(everything)
    assert again.rSet.cpuset == format_cpulist(t.online_cpus)


def test_admit_again_is_idempotent(node):
    params = one(2)
    reply = node.driver.client.admit(pod="p-idem", container="c", claim_uid="u-idem", claim=params,
                                     available=node.available())
    again = node.driver.client.admit(pod="p-idem", container="c", claim_uid="u-idem", claim=params,
                                     available=node.available())
    assert reply.err == again.err == "" and reply.rSet == again.rSet and list(reply.groups) == list(again.groups)
    assert node.driver.client.remove(claim_uid="u-idem", container_id="").err == ""


def test_random_sequences(node):
    """A seeded mix of admissions and removals; every reply checked, every feasible one-group claim admitted."""
    t = node.topology
    rng = random.Random(t.name)
    dev = local_device(t)
    cpu_choices = [("EXCLUSIVE",), ("SHARED",), ("EXCLUSIVE", "CORE-SIBLING-REQUIRED"),
                   ("EXCLUSIVE", "CORE-SIBLING-DENIED"), ("EXCLUSIVE", "CORE-SIBLING-PREFERRED")]
    mems = ["NO-MEM-AFFINITY", "NUMA-MEM-AFFINITY-BIND-REQUIRED", "NUMA-MEM-AFFINITY-BIND-PREFERRED",
            "NUMA-MEM-AFFINITY-INTERLEAVE-PREFERRED"]
    for _ in range(40):
        if node.live and rng.random() < 0.3:
            node.remove(rng.choice(list(node.live)))
            continue
        cpu = rng.choice(cpu_choices)
        count = rng.choice([1, 2, 3, 4, 6]) * (t.threads_per_core if "CORE-SIBLING-REQUIRED" in cpu else 1)
        device = rng.choice(["NO-DEVICE-AFFINITY", {"affinity": "NUMA-DEVICE-AFFINITY-PREFERRED", "device": dev}])
        params = one(count, cpu, rng.choice(mems), device)
        group = parse_claim(params, t, CAPS).groups[0]
        node.admit(params, expect_ok=group_is_satisfiable(t, node.available(), group))
