"""The node against a scripted in-process driver: refusals with reasons, registration, rollback after a crash."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

import grpc
import pytest

from cci_conformance.backends.base import SessionConfig
from cci_conformance.backends.checks import check_snapshot
from cci_conformance.backends.embedded import EmbeddedSession
from cci_conformance.cpuset import format_cpulist, parse_cpulist
from cci_conformance.node.api import ClaimRef, ContainerSpec, PodSpec
from cci_conformance.node.fakedriver import FakeDriver, noop_admit
from cci_conformance.protocol.protos import cci_v1alpha1_pb2 as pb
from cci_conformance.protocol.protos import podresources_v1_pb2 as pr
from cci_conformance.protocol.protos import podresources_v1_pb2_grpc as pr_grpc
from cci_conformance.topology.model import CPU, NumaNode, Topology
from cci_conformance.waiting import wait_for

pytestmark = pytest.mark.integration
# 2 sockets x 4 cores x 2 threads; siblings (i, i+8)
TOPO = Topology("t16", tuple(CPU(i, i // 4 % 2, 0, i % 4, i // 4 % 2) for i in range(16)),
                (NumaNode(0, frozenset({0, 1, 2, 3, 8, 9, 10, 11}), 1, (10, 20)),
                 NumaNode(1, frozenset({4, 5, 6, 7, 12, 13, 14, 15}), 1, (20, 10))))
PROFILE = {"mode": "coexistence", "reservedSystemCPUs": "0", "rpcTimeoutSeconds": 0.5}


def pod(uid: str, cores: str = "2") -> PodSpec:
    return PodSpec("ns", f"p-{uid}", uid, (ContainerSpec("c", claim="cl"),),
                   (ClaimRef("cl", f"cl-{uid}", {"cores": [cores], "cpu attributes": [["EXCLUSIVE"]]}),))


def take(n: int):
    def admit(req):
        cpus = sorted(parse_cpulist(req.availableCpus))[:n]
        return pb.AdmitResponse(rSet=pb.ResourceSet(cpuset=format_cpulist(cpus), exclusive=True))
    return admit


@pytest.fixture
def node():
    workdir = Path(tempfile.mkdtemp(prefix="cci-", dir="/tmp"))
    s = EmbeddedSession(SessionConfig(TOPO, PROFILE, None, workdir))
    drivers: list[FakeDriver] = []

    def start(admit=noop_admit, **info) -> FakeDriver:
        d = FakeDriver(s.kubelet, admit=admit)
        d.info.update(info)
        drivers.append(d.start())
        return d

    s.fake = start
    yield s
    for d in drivers:
        d.stop()
    s.close()
    assert not workdir.exists()


def registered(s, name="fake"):
    wait_for(lambda: name in s.client.ping().drivers, 5, what=f"registration of {name}")


def test_no_driver_then_registration_and_reasons(node):
    r = node.create_pod(pod("a"))
    assert (r.admitted, r.reason) == (False, "DriverNotRegistered")
    d = node.fake(take(2))
    registered(node)
    assert d.of("notify")[-1].plugin_registered
    r = node.create_pod(pod("a"))
    assert r.admitted and r.containers[0].cpus == {1, 2} and r.driver_seconds > 0
    adds = d.of("add")
    assert adds[-1].container_id == r.containers[0].container_id and adds[-1].cgroup.endswith("/poda/c")
    assert Path(adds[-1].cgroup, "cpuset.cpus").read_text().strip() == "1-2"
    with grpc.insecure_channel(f"unix:{node.kubelet / 'pod-resources' / 'kubelet.sock'}") as ch:
        got = pr_grpc.PodResourcesListerStub(ch).Get(pr.GetPodResourcesRequest(pod_name="p-a", pod_namespace="ns"),
                                                     timeout=5)
        assert list(got.pod_resources.containers[0].cpu_ids) == [1, 2]
        with pytest.raises(grpc.RpcError, match="pod nope in namespace ns not found"):
            pr_grpc.PodResourcesListerStub(ch).Get(pr.GetPodResourcesRequest(pod_name="nope", pod_namespace="ns"),
                                                   timeout=5)
    d.admit = lambda req: pb.AdmitResponse(err="no room for you")
    r = node.create_pod(pod("b"))
    assert (r.reason, r.message) == ("CCIAdmitError", "no room for you")
    assert [x.container_id for x in d.of("remove")] == []  # a refusal is not rolled back
    d.admit = lambda req: pb.AdmitResponse(rSet=pb.ResourceSet(cpuset="0-1", exclusive=True))
    r = node.create_pod(pod("c"))
    assert r.reason == "InvalidDriverReply" and "availableCpus" in r.message
    assert d.of("remove")[-1].container_id == "" and d.of("remove")[-1].claim_uid == "cl-c"
    release = threading.Event()
    d.admit = lambda req: (release.wait(5), noop_admit(req))[1]
    r = node.create_pod(pod("slow"))
    release.set()
    assert r.reason == "DriverTimeout" and not r.admitted
    snap = node.snapshot()
    assert set(snap.exclusive) == {"a/c"} and check_snapshot(snap) == []
    node.delete_pod("a")
    assert d.of("remove")[-1].container_id == adds[-1].container_id
    assert node.snapshot().exclusive == {}


def test_registration_refused_with_reason(node):
    d = node.fake(supported_versions=["v9"])
    wait_for(lambda: d.of("notify"), 5, what="NotifyRegistrationStatus")
    status = d.of("notify")[0]
    assert not status.plugin_registered and "v1alpha1" in status.error
    assert node.client.ping().drivers == []
    assert any("v1alpha1" in why for why in node.snapshot().refused.values())


def test_driver_gone_and_back(node):
    d = node.fake(take(2))
    registered(node)
    assert node.create_pod(pod("a")).admitted
    d.stop()
    wait_for(lambda: "fake" not in node.client.ping().drivers, 5, what="deregistration")
    r = node.create_pod(pod("b"))
    assert r.reason == "DriverNotRegistered"
    node.delete_pod("a")  # the node owes the Remove until the driver is back
    assert [o.why for o in node.snapshot().pending] == ["removal"]
    d2 = node.fake(take(2))
    registered(node)
    wait_for(lambda: d2.of("remove"), 5, what="the owed Remove")
    assert not node.snapshot().pending


def test_a_pod_refused_at_its_add_is_removed_under_both_ids(node):
    d = node.fake(take(2))
    registered(node)
    d.add_err = "cannot bind"  # stands for any failed Add: an err, a deadline met, the driver gone
    r = node.create_pod(pod("x"))
    assert (r.admitted, r.reason) == (False, "CCIAddContainerResourceError")
    (add,) = d.of("add")
    # the Add may or may not have landed: the driver holds the admission under the id, or as never added
    assert [(x.claim_uid, x.container_id) for x in d.of("remove")] == [("cl-x", add.container_id), ("cl-x", "")]
    assert not node.snapshot().pending and node.snapshot().exclusive == {}


def test_node_killed_during_admit_rolls_back(node):
    entered, gate = threading.Event(), threading.Event()
    d = node.fake(lambda req: (entered.set(), gate.wait(30))[1])
    registered(node)
    t = threading.Thread(target=lambda: _ignore(lambda: node.client.create_pod(pod("x"))))
    t.start()
    assert entered.wait(5)
    node.stop_node(hard=True)  # SIGKILL while CCIAdmit is in flight
    t.join(10)
    gate.set()
    d.admit = take(2)
    node.start_node()
    wait_for(lambda: any(r.claim_uid == "cl-x" and r.container_id == "" for r in d.of("remove")), 5,
             what="rollback Remove of the in-flight claim")
    snap = node.snapshot()
    assert snap.exclusive == {} and not snap.pending and snap.node_generation == 2
    assert node.create_pod(pod("y")).admitted


def _ignore(fn):
    try:
        fn()
    except Exception:
        pass


def test_corrupt_checkpoint_stops_the_node_with_the_fix(node):
    from cci_conformance.backends.embedded import NodeProcessError

    node.stop_node(hard=True)
    state = node.kubelet / "cpu_manager_state"
    state.write_bytes(state.read_bytes().replace(b'"defaultCpuSet":"', b'"defaultCpuSet":"99,'))
    with pytest.raises(NodeProcessError) as info:
        node.start_node()
    text = str(info.value)
    assert "exited with code 1" in text and "please drain this node and delete the CPU manager checkpoint file" in text
    assert "delete cci_manager_state and cci_manager_state.journal too" in text
    state.unlink()
    (node.kubelet / "cci_manager_state").unlink()
    (node.kubelet / "cci_manager_state.journal").unlink(missing_ok=True)
    node.start_node()  # after deleting them, as the message says, the node starts clean
    assert node.snapshot().exclusive == {}
