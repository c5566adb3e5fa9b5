"""Grouped mode's reading: claims that ask for a share of a group device, its consumed capacity, the containers'
cpusets that show which CPUs the driver picked."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from cci_conformance.certify.settings import load_topology
from cci_conformance.dra.api import Allocation, ClaimSpec, ContainerState, Device, PodSpec, PodState
from cci_conformance.dra.checks import claim_cpus
from cci_conformance.dra.kind_session import KindDraSession
from cci_conformance.dra.objects import claim_object, pod_objects
from cci_conformance.dra.worker import published_capacities
from cci_conformance.kind.cluster.cpuset_log import Record

SERVER = load_topology("server-2s8c-smt2-intel")  # NUMA node 0: CPUs 0-7 and 16-23


def test_a_grouped_claim_asks_one_device_for_its_count_as_capacity():
    spec = claim_object(ClaimSpec("g", 4, numa_node=1), "dra.cpu", "grouped")["spec"]["devices"]["requests"][0]
    assert spec["exactly"]["count"] == 1
    assert spec["exactly"]["capacity"] == {"requests": {"dra.cpu/cpu": "4"}}
    assert spec["exactly"]["selectors"] == [{"cel": {"expression": 'device.attributes["dra.cpu"].numaNodeID == 1'}}]
    individual = claim_object(ClaimSpec("i", 4), "dra.cpu")["spec"]["devices"]["requests"][0]["exactly"]
    assert individual["count"] == 4 and "capacity" not in individual


def test_templates_carry_the_mode_too():
    pod = PodSpec("p", claims=(ClaimSpec("t", 2, template=True),))
    template, _ = pod_objects(pod, "w1", "pause", "dra.cpu", "grouped")
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1


def test_capacities_are_read_per_device_of_this_node_and_driver():
    slices = [{"spec": {"driver": "dra.cpu", "nodeName": "w1", "devices": [
        {"name": "numa-0", "capacity": {"dra.cpu/cpu": {"value": "15"}}}, {"name": "cpu-3"}]}},
        {"spec": {"driver": "dra.cpu", "nodeName": "w2", "devices": [
            {"name": "numa-9", "capacity": {"dra.cpu/cpu": {"value": "8"}}}]}}]
    assert published_capacities(slices, "w1", "dra.cpu", "dra.cpu/cpu") == {"numa-0": "15"}


def _session(raw_claim=None, raw_pod=None, devices=None):
    worker = SimpleNamespace(node="w1", get=lambda kind, name: raw_claim if kind == "resourceclaim" else raw_pod,
                             published_with_capacity=lambda key: devices or ({}, {}), pod_events=lambda n: [])
    return KindDraSession(None, worker, SimpleNamespace(topology=SERVER, profile=None, device_mode="grouped"),
                          "dra.cpu")


def test_the_session_reads_consumed_capacity_as_the_claims_share():
    claim = {"status": {"allocation": {"devices": {"results": [
        {"driver": "dra.cpu", "pool": "w1", "device": "numa-1", "request": "cpus",
         "consumedCapacity": {"dra.cpu/cpu": "4"}}]}}, "reservedFor": [{"name": "p"}]}}
    devices = ({"numa-1": {"numaNodeID": 1, "socketID": 1}}, {"numa-1": "16"})
    allocation = _session(claim, devices=devices).allocation("g")
    assert allocation.shares == (("numa-1", 4),) and allocation.cpus == frozenset()
    (device,) = _session(devices=devices).slices()
    assert (device.name, device.numa_node, device.capacity, device.cpu) == ("numa-1", 1, 16, None)


def test_a_container_knows_the_claims_it_consumes_templates_resolved():
    pod = {"metadata": {"uid": "u"}, "spec": {
        "resourceClaims": [{"name": "own", "resourceClaimTemplateName": "own"},
                           {"name": "x", "resourceClaimName": "x"}],
        "containers": [{"name": "c0", "resources": {"claims": [{"name": "own"}]}}, {"name": "c1"}]},
        "status": {"phase": "Running", "resourceClaimStatuses": [{"name": "own", "resourceClaimName": "p-own-abc"}],
                   "containerStatuses": [{"name": "c0", "containerID": "containerd://1", "state": {"running": {}}},
                                         {"name": "c1", "containerID": "containerd://2", "state": {"running": {}}}]}}
    state = _session(raw_pod=pod).pod("p")
    assert [c.claims for c in state.containers] == [("p-own-abc",), ()]


NUMA0 = (Device("numa-0", None, 0, 0, None, capacity=16),)


def _node(cpus_of: dict[str, frozenset | None], shares: dict[str, tuple], slices=NUMA0):
    at = datetime(2026, 1, 1, tzinfo=UTC)
    records = tuple(Record(i, "create", cid, cpus, at, "container", "default", "p", cid)
                    for i, (cid, cpus) in enumerate(cpus_of.items()))
    return SimpleNamespace(topology=SERVER, cpuset_records=lambda: records, slices=lambda: slices,
                           allocation=lambda c: Allocation(c, True, ("numa-0",), frozenset(), ("p",), shares[c]))


def _pod(*containers: tuple[str, tuple[str, ...]]) -> PodState:
    claims = tuple(dict.fromkeys(c for _, cs in containers for c in cs))
    return PodState("p", "u", "Running", tuple(ContainerState(n, n, True, 0, cs) for n, cs in containers), claims)


def test_a_grouped_claims_cpus_are_its_containers_cpuset_when_it_holds_the_share():
    node = _node({"c0": frozenset({0, 16})}, {"g": (("numa-0", 2),)})
    assert claim_cpus(node, _pod(("c0", ("g",)))) == {0, 16}


@pytest.mark.parametrize(("cpuset", "why"), [
    (frozenset({0}), "1 CPUs for grouped claims that consumed 2"),
    (frozenset({0, 1, 16}), "3 CPUs for grouped claims that consumed 2"),
    (frozenset({0, 8}), "outside NUMA nodes"),  # CPU 8 is NUMA node 1's
    (None, "gave it every CPU"),
])
def test_a_container_off_its_grouped_share_fails_the_test_that_reads_it(cpuset, why):
    node = _node({"c0": cpuset}, {"g": (("numa-0", 2),)})
    with pytest.raises(AssertionError, match=why):
        claim_cpus(node, _pod(("c0", ("g",))))


def test_a_grouped_claim_no_container_consumes_cannot_be_read():
    node = _node({"c0": frozenset({0, 16})}, {"g": (("numa-0", 2),)})
    with pytest.raises(AssertionError, match="consumed by no container"):
        claim_cpus(node, PodState("p", "u", "Running", (ContainerState("c0", "c0", True),), ("g",)))
