"""kind e2e of the sleeping alpha mode: a policy-none kubelet seeing the real host, before and after a CCI driver."""

from __future__ import annotations

import os
import subprocess

import pytest
from kind_plans import DRIVER, GO_REFERENCE
from test_kind_cci_alpha import ALPHA_FLAGS, ALPHA_PROFILE

from cci_conformance.drivers.manifest import load_manifest
from cci_conformance.kind.cci import deploy
from cci_conformance.kind.cci.manifests import CCIDriverDeployment
from cci_conformance.kind.cluster import lifecycle as kind_cluster_mod
from cci_conformance.kind.cluster import pods, toolchain
from cci_conformance.kind.cluster.config import ClusterPlan, NodePlan
from cci_conformance.kind.cluster.node_access import NodeAccess
from cci_conformance.kind.differential import Step
from cci_conformance.kind.image import go_driver
from cci_conformance.kind.runner import say
from cci_conformance.node.profile import parse_config
from cci_conformance.waiting import wait_for

pytestmark = pytest.mark.kind

CCI_STATE = "/var/lib/kubelet/cci_manager_state"
PLAIN_POD = "sleep-plain"
# The CPU manager's reconcile loop, started at the wake-up, runs every 10 s (cpuManagerReconcilePeriod).
RECONCILE_WAIT_S = 25.0


@pytest.fixture(scope="module")
def sleeping(node_image, tmp_path_factory):
    """A control plane and one policy-none worker whose kubelet sees the real host (as the DRA suites' workers)."""
    prefix = os.environ.get("CCI_KIND_E2E_PREFIX", "cci-e2e")
    plan = ClusterPlan(f"{prefix}-sleep-{os.getpid()}", node_image.image, [
        NodePlan("control-plane"),
        NodePlan("worker", None, parse_config(ALPHA_PROFILE), kubelet_flags=dict(ALPHA_FLAGS)),
    ])
    with kind_cluster_mod.KindCluster(plan, kind=toolchain.kind_binary(), kubectl=toolchain.kubectl_binary(),
                                      logs_dir=tmp_path_factory.mktemp("kind-sleep-logs")) as created:
        created.create()
        created.wait_ready()
        worker = created.node_names()[1]
        image = pods.pause_image(created, worker)
        plain = pods.create_and_wait(created, Step(PLAIN_POD, ((None, None),)).pod(""), worker, image)
        assert plain.phase == "Running", plain
        yield created, worker
    assert plan.name not in kind_cluster_mod.list_clusters(toolchain.kind_binary())


def _allocatable_cpus(worker: str) -> frozenset[int]:
    import grpc

    from cci_conformance.protocol.protos import podresources_v1_pb2 as pr
    from cci_conformance.protocol.protos import podresources_v1_pb2_grpc as pr_grpc

    pid = subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", worker], capture_output=True, text=True,
                         check=True, timeout=30).stdout.strip()
    # the node container's kubelet socket, through its root (the harness runs as root beside docker)
    with grpc.insecure_channel(f"unix:/proc/{pid}/root/var/lib/kubelet/pod-resources/kubelet.sock") as channel:
        reply = pr_grpc.PodResourcesListerStub(channel).GetAllocatableResources(
            pr.AllocatableResourcesRequest(), timeout=10)
    return frozenset(reply.cpu_ids)


def _host_online(node: NodeAccess) -> frozenset[int]:
    from cci_conformance.cpuset import parse_cpulist

    return parse_cpulist(node.host.file("/sys/devices/system/cpu/online").content_string.strip())


def test_asleep_the_kubelet_is_the_unpatched_none_one_then_a_registration_wakes_it(sleeping):
    cluster, worker = sleeping
    node = NodeAccess(worker)
    # Asleep (docs/spec.md S3.1): no cci_manager_state, no allocatable CPUs (the none policy's answer), and
    # no container of the node ever asked the runtime for a cpuset (kube-proxy, kindnet, the plain pod).
    assert not node.host.file(CCI_STATE).exists
    assert _allocatable_cpus(worker) == frozenset()
    assert node.recorded_cpusets() == {}, node.recorded_cpusets()
    assert "CCI alpha: awake from the start" not in node.kubelet_log(2000)

    built = go_driver.build_image()
    plan = CCIDriverDeployment(load_manifest(GO_REFERENCE), built.reference, worker, DRIVER)
    seconds = deploy.deploy(cluster, plan, built.archive, 1)
    say(f"cci alpha sleep: driver registered {seconds:.1f} s after apply")
    try:
        # Awake: the file is written (mode alpha, nothing held), allocatable = online - reserved, and the
        # reconcile loop puts every container on the shared pool (online - held = every host CPU).
        wait_for(lambda: node.host.file(CCI_STATE).exists, 30, interval=0.5, what=f"{CCI_STATE} after registration")
        cci = node.cci_manager_state()
        assert (cci["mode"], cci["containers"], cci["pending"]) == ("alpha", [], []), cci
        online = _host_online(node)
        assert _allocatable_cpus(worker) == online - {0}
        wait_for(lambda: any(r.pod_name == PLAIN_POD for r in node.recorded_cpusets().values()), RECONCILE_WAIT_S,
                 interval=1.0, what=f"the reconcile loop to give {PLAIN_POD} a cpuset")
        plain = [r for r in node.recorded_cpusets().values() if r.pod_name == PLAIN_POD]
        assert [r.requested for r in plain] == [online], plain
    finally:
        deploy.undeploy(cluster, plan)
