"""kind e2e of the alpha mode: the CCI-patched kubelet with CPU manager policy none and the Go reference driver."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

import pytest
from kind_plans import DRIVER, GO_REFERENCE, INTEL, SLOTS
from test_kind_cci_differential import DENIED_SHARED, X3, X4, _assert_agree, _both_sides

from cci_conformance.cpuset import format_cpulist, parse_cpulist
from cci_conformance.drivers.manifest import load_manifest
from cci_conformance.kind.cci import deploy, manifests
from cci_conformance.kind.cci.manifests import CCIDriverDeployment
from cci_conformance.kind.cluster import lifecycle as kind_cluster_mod
from cci_conformance.kind.cluster import pods, toolchain
from cci_conformance.kind.cluster.config import ClusterPlan, NodePlan
from cci_conformance.kind.cluster.node_access import NodeAccess
from cci_conformance.kind.differential import Step, g
from cci_conformance.kind.image import go_driver
from cci_conformance.kind.runner import say
from cci_conformance.node.profile import parse_config
from cci_conformance.topology import library
from cci_conformance.waiting import wait_for

pytestmark = pytest.mark.kind

ALPHA_PROFILE = {"mode": "alpha", "cpuManagerPolicy": "none", "reservedSystemCPUs": "0", "cci": True}
# cluster.config.kubelet_args passes --reserved-cpus with the static policy only; alpha needs it too
# (availableCpus = online - reserved - held, docs/spec.md S3.2), so the worker gets it as an extra flag.
ALPHA_FLAGS = {"reserved-cpus": "0"}
# The none policy's cpu_manager_state, byte for byte (docs/spec.md S3.5): alpha must leave it so.
NONE_FILE = b'{"policyName":"none","defaultCpuSet":"","checksum":1353318690}'
CLAIM_POD, STATIC_POD = "alpha-claim-4", "alpha-g4"
# The kubelet moves containers without a claim when a grant takes CPUs or gives them back in its CPU
# manager's reconcile loop (every 10 s), which the patched kubelet runs under policy none (kubelet-cci).
RECONCILE_WAIT_S = 25.0


@dataclass
class Admitted:
    cluster: kind_cluster_mod.KindCluster
    plan: CCIDriverDeployment
    node: NodeAccess
    pod_uid: str
    claim_uid: str
    grant: frozenset[int]
    static_uid: str


@pytest.fixture(scope="module")
def alpha_cluster(node_image, tmp_path_factory):
    """A control plane and one alpha worker (its own cluster: the session's workers run the static policy)."""
    prefix = os.environ.get("CCI_KIND_E2E_PREFIX", "cci-e2e")
    plan = ClusterPlan(f"{prefix}-alpha-{os.getpid()}", node_image.image, [
        NodePlan("control-plane"),
        NodePlan("worker", library.load(INTEL), parse_config(ALPHA_PROFILE), kubelet_flags=dict(ALPHA_FLAGS)),
    ])
    with kind_cluster_mod.KindCluster(plan, kind=toolchain.kind_binary(), kubectl=toolchain.kubectl_binary(),
                                      logs_dir=tmp_path_factory.mktemp("kind-alpha-logs")) as created:
        created.create()
        created.wait_ready()
        yield created
    assert plan.name not in kind_cluster_mod.list_clusters(toolchain.kind_binary())


@pytest.fixture(scope="module")
def alpha(alpha_cluster):
    """The Go reference registered with the alpha worker's kubelet, a claim pod and a Guaranteed pod admitted."""
    cluster = alpha_cluster
    worker = cluster.node_names()[1]
    node = NodeAccess(worker)
    built = go_driver.build_image()
    plan = CCIDriverDeployment(load_manifest(GO_REFERENCE), built.reference, worker, DRIVER)
    seconds = deploy.deploy(cluster, plan, built.archive, SLOTS)
    say(f"cci alpha: driver registered {seconds:.1f} s after apply")
    image = pods.pause_image(cluster, worker)
    try:
        pod = _run_claim_pod(cluster, worker, CLAIM_POD, X4, image)
        assert pod["status"]["phase"] == "Running", pod["status"]
        claim_uid = cluster.kubectl("get", "resourceclaim", CLAIM_POD, "-o", "jsonpath={.metadata.uid}")
        record = _cci_record(node, pod["metadata"]["uid"])
        static = pods.create_and_wait(cluster, Step(STATIC_POD, g("4")).pod(""), worker, image)
        assert static.phase == "Running", static
        yield Admitted(cluster, plan, node, pod["metadata"]["uid"], claim_uid, parse_cpulist(record["exclusive"]),
                       static.uid)
    finally:
        for name in (CLAIM_POD, STATIC_POD):
            cluster.kubectl("delete", "pod", name, "--ignore-not-found", "--wait=true", "--timeout=120s", timeout=130)
            cluster.kubectl("delete", "resourceclaim", name, "--ignore-not-found")
        deploy.undeploy(cluster, plan)


def _run_claim_pod(cluster, worker: str, name: str, params: dict, image: str) -> dict:
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(manifests.resource_claim(name, DRIVER, params)))
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(manifests.claim_pod(name, name, worker, image)))
    return deploy.wait_pod(cluster, name)


def _cci_record(node: NodeAccess, pod_uid: str) -> dict:
    records = [r for r in node.cci_manager_state()["containers"] if r["podUID"] == pod_uid]
    assert [r["container"] for r in records] == ["c0"], records
    return records[0]


def _recorded(node: NodeAccess, pod_name: str) -> frozenset[int] | None:
    """The cpuset the kubelet last asked the runtime for, for the pod's running container c0."""
    running = node.running_container_ids()
    for cid, record in node.recorded_cpusets().items():
        if (record.pod_name, record.container_name) == (pod_name, "c0") and cid in running:
            return record.requested
    return None


def test_the_grant_lives_in_cci_manager_state_and_the_runtime_only(alpha):
    node, grant = alpha.node, alpha.grant
    cci = node.cci_manager_state()
    record = _cci_record(node, alpha.pod_uid)
    # The CCI manager ran in alpha and recorded the mode; the claim is the one DRA allocated.
    assert cci["mode"] == "alpha"
    assert (record["driver"], record["claimName"], record["claimUID"]) == (DRIVER, CLAIM_POD, alpha.claim_uid)
    assert record["running"] and record["containerID"] and record["source"] == "cci"
    topology = library.load(INTEL)
    assert len(grant) == 4 and all(topology.core_of[cpu] <= grant for cpu in grant) and 0 not in grant
    # The Guaranteed pod is not the CCI manager's: no record, and the none policy gave it nothing to record.
    assert alpha.static_uid not in {r["podUID"] for r in cci["containers"]}
    # S3.5: cpu_manager_state is the none policy's file byte for byte, grants or not.
    assert node.state_bytes() == NONE_FILE
    # The driver was offered online - reserved (S3.2) and learnt the container id (Add).
    admission = deploy.driver_admissions(deploy.driver_state(alpha.plan))[(alpha.pod_uid, "c0")]
    assert admission["claim_uid"] == alpha.claim_uid and admission["container_id"] == record["containerID"]
    assert parse_cpulist(",".join(group["cpus"] for group in admission["groups"])) == grant
    # S3.1/S3.3: the claim's container runs on its grant, the Guaranteed pod on the shared pool (online - held,
    # the reserved CPU included), both asked of the runtime at create and kept by the reconcile loop.
    shared = frozenset(topology.online_cpus) - grant
    wait_for(lambda: _recorded(node, CLAIM_POD) == grant and _recorded(node, STATIC_POD) == shared,
             timeout=RECONCILE_WAIT_S, interval=1, what="the runtime's cpusets to be the grant and the shared pool")


def test_a_kill_9_of_the_kubelet_keeps_the_grant(alpha):
    cluster, node = alpha.cluster, alpha.node
    before = node.cci_manager_state()
    container_id = _cci_record(node, alpha.pod_uid)["containerID"]
    old = node.kubelet_pid()
    started = time.monotonic()
    node.host.check_output(f"kill -9 {old}")
    wait_for(lambda: node.kubelet_pid() not in (0, old), timeout=60, interval=0.5,
             what="systemd to restart the kubelet")
    wait_for(lambda: cluster.kubectl("get", "--raw", f"/api/v1/nodes/{node.node}/proxy/healthz") == "ok",
             timeout=120, interval=1, what="the restarted kubelet to answer /healthz")
    say(f"cci alpha: kubelet back {time.monotonic() - started:.1f} s after kill -9")
    # cci_manager_state is the only record of the grant in alpha: restored from it, not granted again.
    assert node.cci_manager_state()["containers"] == before["containers"]
    assert node.state_bytes() == NONE_FILE
    pod = json.loads(cluster.kubectl("get", "pod", CLAIM_POD, "-o", "json"))
    status = pod["status"]["containerStatuses"][0]
    assert status["containerID"].endswith(container_id) and status["restartCount"] == 0
    # Past one reconcile period of the new kubelet, the container is still on its grant.
    deadline = time.monotonic() + RECONCILE_WAIT_S
    wait_for(lambda: time.monotonic() > deadline and _recorded(node, CLAIM_POD) == alpha.grant,
             timeout=2 * RECONCILE_WAIT_S, interval=1, what="the restarted kubelet to keep the claim on its grant")
    # The restored store holds the grant: a claim admitted now gets other CPUs.
    wait_for(lambda: not deploy.slice_exists(cluster, alpha.plan), timeout=60, interval=0.5,
             what="the restarted kubelet to wipe its node's ResourceSlices")
    deploy.republish_slice(cluster, alpha.plan, SLOTS)
    name = "alpha-after-kill"
    try:
        pod = _run_claim_pod(cluster, node.node, name, X3, pods.pause_image(cluster, node.node))
        assert pod["status"]["phase"] == "Running", pod["status"]
        grant = parse_cpulist(_cci_record(node, pod["metadata"]["uid"])["exclusive"])
        assert len(grant) == 3 and not grant & (alpha.grant | {0})
        assert node.state_bytes() == NONE_FILE
    finally:
        cluster.kubectl("delete", "pod", name, "--ignore-not-found", "--wait=true", "--timeout=120s", timeout=130)
        cluster.kubectl("delete", "resourceclaim", name, "--ignore-not-found")


def test_deleting_the_pod_releases_the_grant_to_the_shared_pool(alpha):
    cluster, node = alpha.cluster, alpha.node
    cluster.kubectl("delete", "pod", CLAIM_POD, "--wait=true", "--timeout=120s", timeout=130)
    wait_for(lambda: not node.cci_manager_state()["containers"] and not node.cci_manager_state()["pending"],
             timeout=120, interval=1, what="cci_manager_state to forget the deleted claim pod")
    changes = deploy.driver_state(alpha.plan)
    assert [[alpha.pod_uid, "c0"]] in [c.get("del") for c in changes]
    assert (alpha.pod_uid, "c0") not in deploy.driver_admissions(changes)
    assert node.state_bytes() == NONE_FILE
    # The Guaranteed pod follows the shared pool back onto every CPU (reconcile loop).
    online = frozenset(library.load(INTEL).online_cpus)
    wait_for(lambda: _recorded(node, STATIC_POD) == online, timeout=RECONCILE_WAIT_S, interval=1,
             what=f"the Guaranteed pod to run on {format_cpulist(online)} again")


# Claims and Guaranteed pods interleaved, a withheld sibling and a SHARED group, deletions of both kinds.
ALPHA_STEPS = [("xa-c4", X4), ("xa-g4", ("4",)), ("xa-cds", DENIED_SHARED), ("xa-c4", None),
               ("xa-c3", X3), ("xa-cds", None), ("xa-g4", None), ("xa-c3", None)]


def test_alpha_agrees_with_the_embedded_node(alpha):
    """The same steps on the alpha kubelet and on the embedded node in alpha (profiles/node/alpha.yaml's
    settings on the same machine): outcomes, cpu_manager_state bytes, CCI records and the runtime's cpusets."""
    real, ours, _ = _both_sides(alpha.cluster, alpha.node.node, ALPHA_STEPS, profile=ALPHA_PROFILE)
    assert set(real[0].values()) == {"admitted"}
    assert set(real[1]) == {NONE_FILE}, "alpha wrote something else than the none policy's cpu_manager_state"
    _assert_agree(ALPHA_STEPS, real, ours)
