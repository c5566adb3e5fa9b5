"""kind e2e: the Go reference CCI driver under the CCI-patched kubelet of a faked static-policy worker."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import pytest
from kind_plans import DRIVER, INTEL, SLOTS

from cci_conformance.cpuset import format_cpulist, parse_cpulist
from cci_conformance.kind.cci import deploy, manifests
from cci_conformance.kind.cci.manifests import CCIDriverDeployment
from cci_conformance.kind.cluster import pods
from cci_conformance.kind.cluster.node_access import CCI_STATE_PATH, NodeAccess
from cci_conformance.kind.differential import Step, g
from cci_conformance.kind.runner import say
from cci_conformance.node import checkpoint
from cci_conformance.topology import library
from cci_conformance.waiting import wait_for

pytestmark = pytest.mark.kind

# Four CPUs, whole cores (spec S2.4): the grant must be two sibling pairs of the SMT2 worker.
PARAMS = {"cores": ["4"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-REQUIRED"]]}
CLAIM, CLAIM_POD, STATIC_POD = "cci-claim-4", "cci-pod-4", "cci-static-g4"


@dataclass
class Admitted:
    plan: CCIDriverDeployment
    node: NodeAccess
    pod_uid: str
    claim_uid: str
    grant: frozenset[int]
    static_uid: str
    static_cpus: frozenset[int]


@pytest.fixture(scope="module")
def admitted(cluster, intel_worker, cci_driver):
    node = NodeAccess(intel_worker)
    wait_for(lambda: not node.cpu_manager_state().entries, timeout=60, interval=0.5,
             what=f"{intel_worker} to have no exclusive assignments")
    image = pods.pause_image(cluster, intel_worker)
    try:
        started = time.monotonic()
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(manifests.resource_claim(CLAIM, DRIVER, PARAMS)))
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(manifests.claim_pod(CLAIM_POD, CLAIM, intel_worker,
                                                                                   image)))
        pod = deploy.wait_pod(cluster, CLAIM_POD)
        say(f"cci: claim pod running {time.monotonic() - started:.1f} s after its claim was created")
        assert pod["status"]["phase"] == "Running", pod["status"]
        claim = json.loads(cluster.kubectl("get", "resourceclaim", CLAIM, "-o", "json"))
        record = _cci_record(node, pod["metadata"]["uid"])
        static = pods.create_and_wait(cluster, Step(STATIC_POD, g("4")).pod(""), intel_worker, image)
        assert static.phase == "Running", static
        static_cpus = node.cpu_manager_state().entries[static.uid]["c0"]
        yield Admitted(cci_driver, node, pod["metadata"]["uid"], claim["metadata"]["uid"],
                       parse_cpulist(record["exclusive"]), static.uid, frozenset(static_cpus))
    finally:
        for name in (CLAIM_POD, STATIC_POD):
            cluster.kubectl("delete", "pod", name, "--ignore-not-found", "--wait=true", "--timeout=120s", timeout=130)
        cluster.kubectl("delete", "resourceclaim", CLAIM, "--ignore-not-found")


def _cci_record(node: NodeAccess, pod_uid: str) -> dict:
    records = [r for r in node.cci_manager_state()["containers"] if r["podUID"] == pod_uid]
    assert [r["container"] for r in records] == ["c0"], records
    return records[0]


def _recorded(node: NodeAccess, pod_name: str) -> frozenset[int] | None:
    for record in node.recorded_cpusets().values():
        if (record.pod_name, record.container_name) == (pod_name, "c0"):
            return record.requested
    return None


def test_claim_container_runs_on_the_drivers_grant_beside_a_static_pod(cluster, admitted):
    node, grant = admitted.node, admitted.grant
    record = _cci_record(node, admitted.pod_uid)
    # cci_manager_state verifies (checksum) and holds the claim as DRA allocated it (kubelet-cci "Claims").
    assert (record["driver"], record["claimName"], record["claimUID"]) == (DRIVER, CLAIM, admitted.claim_uid)
    assert record["running"] and record["containerID"] and record["source"]
    assert len(grant) == 4 and record["withheld"] == "" and record["shared"] == ""
    # Whole cores: every CPU's siblings are in the grant.
    topology = library.load(INTEL)
    assert all(topology.core_of[cpu] <= grant for cpu in grant)
    # One store: the grant is the container's cpu_manager_state entry and is out of the shared pool;
    # the static pod's exclusive CPUs are disjoint from it and from the reserved CPU.
    assert not grant & admitted.static_cpus, "the static policy handed the CCI grant to a static pod"
    cpu_state = node.cpu_manager_state()
    assert cpu_state.entries.get(admitted.pod_uid) == {"c0": grant}
    assert not grant & cpu_state.default_cpuset
    assert len(admitted.static_cpus) == 4 and not admitted.static_cpus & parse_cpulist("0")
    # The driver granted exactly that, for this claim's parameters, and learnt the container's id (Add).
    admission = deploy.driver_admissions(deploy.driver_state(admitted.plan))[
        (admitted.pod_uid, "c0")]
    assert admission["claim_uid"] == admitted.claim_uid
    assert admission["resource_handle"] == manifests.handle_of(PARAMS)
    assert parse_cpulist(",".join(group["cpus"] for group in admission["groups"])) == grant
    assert admission["container_id"] == record["containerID"]
    # The runtime was asked for the grant at create (the cpuset recorder), the static pod for its CPUs.
    wait_for(lambda: _recorded(node, CLAIM_POD) == grant and _recorded(node, STATIC_POD) == admitted.static_cpus,
             timeout=60, interval=1, what="the runtime's cpusets to be the grants")


def test_admission_latency_is_a_kubelet_metric(cluster, admitted):
    text = deploy.kubelet_metrics(cluster, admitted.node.node)
    calls = deploy.metric_samples(text, "kubelet_cci_admit_duration_seconds_count")
    total = deploy.metric_samples(text, "kubelet_cci_admit_duration_seconds_sum")
    key = (("driver", DRIVER), ("outcome", "admitted"))
    assert calls.get(key, 0) >= 1, calls
    whole = deploy.metric_samples(text, "kubelet_cci_admission_duration_seconds_count")
    assert whole.get((("outcome", "admitted"),), 0) >= 1, whole
    # the running claim container had its CCIAddContainerResource timed too (issue 26: kind judges Admit + Add)
    adds = deploy.metric_samples(text, "kubelet_cci_add_container_duration_seconds_count")
    add_total = deploy.metric_samples(text, "kubelet_cci_add_container_duration_seconds_sum")
    added = (("driver", DRIVER), ("outcome", "added"))
    assert adds.get(added, 0) >= 1, adds
    say(f"cci: CCIAdmit mean {1000 * total[key] / calls[key]:.2f} ms over {int(calls[key])} call(s), "
        f"Add mean {1000 * add_total[added] / adds[added]:.2f} ms over {int(adds[added])}")


@pytest.mark.parametrize("how", ["kill -9 {pid}", "systemctl restart kubelet"], ids=["kill-9", "systemctl-restart"])
def test_a_kubelet_restart_keeps_every_grant(cluster, admitted, how):
    node = admitted.node
    before_cpu, before_cci = node.cpu_manager_state(), node.cci_manager_state()
    container_id = _cci_record(node, admitted.pod_uid)["containerID"]
    old = node.kubelet_pid()
    assert old > 0
    started = time.monotonic()
    node.host.check_output(how.format(pid=old))
    wait_for(lambda: node.kubelet_pid() not in (0, old), timeout=60, interval=0.5,
             what="systemd to restart the kubelet")
    wait_for(lambda: cluster.kubectl("get", "--raw", f"/api/v1/nodes/{node.node}/proxy/healthz") == "ok",
             timeout=120, interval=1, what="the restarted kubelet to answer /healthz")
    say(f"cci: kubelet back {time.monotonic() - started:.1f} s after {how.format(pid=old)}")
    # The restarted kubelet wipes its node's ResourceSlices (DRA manager start-up); the harness publishes again.
    wait_for(lambda: not deploy.slice_exists(cluster, admitted.plan), timeout=60, interval=0.5,
             what="the restarted kubelet to wipe its node's ResourceSlices")
    deploy.republish_slice(cluster, admitted.plan, SLOTS)
    assert deploy.slice_exists(cluster, admitted.plan)
    # Restored, not re-granted: the same container, the same CPUs in both checkpoints and in the runtime.
    after_cci = node.cci_manager_state()
    assert after_cci["containers"] == before_cci["containers"]
    after_cpu = node.cpu_manager_state()
    assert after_cpu.entries == before_cpu.entries and after_cpu.default_cpuset == before_cpu.default_cpuset
    pod = json.loads(cluster.kubectl("get", "pod", CLAIM_POD, "-o", "json"))
    status = pod["status"]["containerStatuses"][0]
    assert status["containerID"].endswith(container_id) and status["restartCount"] == 0
    # The reconcile loop of the restarted kubelet keeps the container on its grant.
    wait_for(lambda: node.cpu_manager_state().entries == before_cpu.entries, timeout=30, interval=1,
             what="cpu_manager_state to stay as before the kill")
    assert _recorded(node, CLAIM_POD) == admitted.grant
    live = deploy.driver_admissions(deploy.driver_state(admitted.plan))
    assert set(live) == {(admitted.pod_uid, "c0")}, "the driver must hold exactly the one admission"


def _run_claim_pod(cluster, node: str, name: str, params: dict) -> dict:
    image = pods.pause_image(cluster, node)
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(manifests.resource_claim(name, DRIVER, params)))
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(manifests.claim_pod(name, name, node, image)))
    return deploy.wait_pod(cluster, name)


def _remove_claim_pod(cluster, node: NodeAccess, name: str) -> None:
    """Delete the pod and its claim, and wait until the kubelet released whatever the pod held."""
    uid = cluster.kubectl("get", "pod", name, "--ignore-not-found", "-o", "jsonpath={.metadata.uid}")
    cluster.kubectl("delete", "pod", name, "--ignore-not-found", "--wait=true", "--timeout=120s", timeout=130)
    cluster.kubectl("delete", "resourceclaim", name, "--ignore-not-found")
    wait_for(lambda: uid not in node.cpu_manager_state().entries
             and uid not in {r["podUID"] for r in node.cci_manager_state()["containers"]},
             timeout=120, interval=1, what=f"the kubelet to release what pod {name} held")


def test_after_the_restarts_a_new_claim_gets_other_cpus(cluster, admitted):
    node, name = admitted.node, "cci-pod-after-restart"
    try:
        pod = _run_claim_pod(cluster, node.node, name, {"cores": ["2"], "cpu attributes": [["EXCLUSIVE"]]})
        assert pod["status"]["phase"] == "Running", pod["status"]
        grant = parse_cpulist(_cci_record(node, pod["metadata"]["uid"])["exclusive"])
        assert len(grant) == 2 and not grant & (admitted.grant | admitted.static_cpus | parse_cpulist("0"))
        assert node.cpu_manager_state().entries[pod["metadata"]["uid"]] == {"c0": grant}
    finally:
        _remove_claim_pod(cluster, node, name)


def test_denied_siblings_are_held_and_a_shared_group_runs_on_the_pool(cluster, admitted):
    node, name = admitted.node, "cci-pod-denied-shared"
    params = {"cores": ["1", "2"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-DENIED"], ["SHARED"]]}
    try:
        pod = _run_claim_pod(cluster, node.node, name, params)
        assert pod["status"]["phase"] == "Running", pod["status"]
        uid = pod["metadata"]["uid"]
        record = _cci_record(node, uid)
        exclusive, withheld, shared = (parse_cpulist(record[k]) for k in ("exclusive", "withheld", "shared"))
        # S2.4: the exclusive CPU's idle sibling is withheld; S2.9: the shared group is not held.
        assert len(exclusive) == 1 and withheld == library.load(INTEL).core_of[min(exclusive)] - exclusive
        assert len(shared) == 2 and not shared & (exclusive | withheld)
        # One store (S3.2): exclusive and withheld CPUs are the container's entry, out of the shared pool.
        state = node.cpu_manager_state()
        assert state.entries.get(uid) == {"c0": exclusive | withheld}
        assert not (exclusive | withheld) & state.default_cpuset and shared <= state.default_cpuset
        # S3.3: the container runs on its exclusive CPU plus its shared group, never on the withheld sibling.
        wait_for(lambda: _recorded(node, name) == exclusive | shared, timeout=60, interval=1,
                 what="the runtime's cpuset to be the exclusive CPU and the shared group")
    finally:
        _remove_claim_pod(cluster, node, name)


def test_a_claim_the_driver_refuses_fails_the_pod_and_changes_nothing(cluster, admitted):
    node, name = admitted.node, "cci-pod-too-big"
    before = node.cpu_manager_state()
    try:
        pod = _run_claim_pod(cluster, node.node, name, {"cores": ["64"], "cpu attributes": [["EXCLUSIVE"]]})
        # The kubelet refuses the pod with the embedded node's reason; the driver's err is the message.
        assert pod["status"]["phase"] == "Failed" and pod["status"].get("reason") == "CCIAdmitError", pod["status"]
        assert "64" in pod["status"].get("message", ""), pod["status"]
        after = node.cpu_manager_state()
        assert after.entries == before.entries and after.default_cpuset == before.default_cpuset
        assert pod["metadata"]["uid"] not in {r["podUID"] for r in node.cci_manager_state()["containers"]}
    finally:
        _remove_claim_pod(cluster, node, name)


def test_a_pod_removed_while_the_kubelet_was_down_is_released_at_the_driver(cluster, admitted):
    node, name = admitted.node, "cci-pod-gone-while-down"
    try:
        pod = _run_claim_pod(cluster, node.node, name, {"cores": ["2"], "cpu attributes": [["EXCLUSIVE"]]})
        assert pod["status"]["phase"] == "Running", pod["status"]
        uid = pod["metadata"]["uid"]
        grant = parse_cpulist(_cci_record(node, uid)["exclusive"])
        sandbox = node.host.check_output(f"crictl pods --name {name} -q").strip()
        assert sandbox
        # While the kubelet is down: the pod leaves the API server and the runtime (containers included).
        node.host.check_output("systemctl stop kubelet")
        cluster.kubectl("delete", "pod", name, "--force", "--grace-period=0")
        node.host.check_output(f"crictl stopp {sandbox} && crictl rmp -f {sandbox}")
        node.host.check_output("systemctl start kubelet")
        wait_for(lambda: not deploy.slice_exists(cluster, admitted.plan), timeout=60, interval=0.5,
                 what="the restarted kubelet to wipe its node's ResourceSlices")
        deploy.republish_slice(cluster, admitted.plan, SLOTS)

        # At start the CCI manager finds the container gone: it releases the CPUs and owes the driver a
        # Remove, which it sends once the driver has registered again (kubelet-cci restore.go).
        def released_everywhere():
            cci, cpu = node.cci_manager_state(), node.cpu_manager_state()
            live = deploy.driver_admissions(deploy.driver_state(admitted.plan))
            return (uid not in {r["podUID"] for r in cci["containers"]} and not cci["pending"]
                    and uid not in cpu.entries and grant <= cpu.default_cpuset and (uid, "c0") not in live)
        wait_for(released_everywhere, timeout=120, interval=1,
                 what=f"the restarted kubelet to release {format_cpulist(grant)} and the driver to drop them")
        assert node.cpu_manager_state().entries.get(admitted.pod_uid) == {"c0": admitted.grant}
    finally:
        node.host.run("systemctl start kubelet")  # whatever failed, leave the kubelet running
        cluster.kubectl("delete", "pod", name, "--ignore-not-found", "--force", "--grace-period=0")
        cluster.kubectl("delete", "resourceclaim", name, "--ignore-not-found")


def test_deleting_the_pod_releases_at_the_driver_and_to_the_shared_pool(cluster, admitted):
    node = admitted.node
    cluster.kubectl("delete", "pod", CLAIM_POD, "--wait=true", "--timeout=120s", timeout=130)

    def released():
        state = node.cpu_manager_state()
        cci = node.cci_manager_state()
        return (admitted.pod_uid not in state.entries and admitted.grant <= state.default_cpuset
                and not cci["containers"] and not cci["pending"])
    wait_for(released, timeout=120, interval=1, what=f"CPUs {format_cpulist(admitted.grant)} back in the shared pool")
    # CCIRemoveContainerResource reached the driver: its state log deleted the admission.
    changes = deploy.driver_state(admitted.plan)
    assert [[admitted.pod_uid, "c0"]] in [c.get("del") for c in changes]
    assert (admitted.pod_uid, "c0") not in deploy.driver_admissions(changes)
    # The static pod kept its CPUs throughout.
    assert node.cpu_manager_state().entries[admitted.static_uid] == {"c0": admitted.static_cpus}


def test_a_corrupt_cci_manager_state_stops_the_kubelet_with_the_embedded_nodes_advice(cluster, admitted):
    node = admitted.node
    assert not node.cci_manager_state()["containers"], "runs after the CCI pods are gone"
    # The embedded node's words (checkpoint.py restore_error); the kubelet keeps no journal, so its advice
    # ends at the file's name (kubelet-cci/README.md, checkpoint.go).
    advice = str(checkpoint.restore_error(CCI_STATE_PATH, "checkpoint is corrupted (checksum mismatch)"))
    advice = advice.split(" and its journal")[0]
    try:
        node.host.check_output("systemctl stop kubelet")
        node.host.check_output(f"sed -i -E 's/\"Checksum\":[0-9]+/\"Checksum\":1/' {CCI_STATE_PATH}")
        node.host.check_output("systemctl start kubelet")
        wait_for(lambda: advice in node.kubelet_log(lines=200), timeout=60, interval=1,
                 what="the kubelet to refuse the corrupt cci_manager_state with the advice")
    finally:
        # The advice, followed: no CCI container is left, so deleting the file loses nothing.
        node.host.check_output(f"rm -f {CCI_STATE_PATH} && systemctl restart kubelet")
    wait_for(lambda: cluster.kubectl("get", "--raw", f"/api/v1/nodes/{node.node}/proxy/healthz") == "ok",
             timeout=120, interval=1, what="the kubelet to start again without the corrupt file")
    assert node.cci_manager_state()["containers"] == []
    assert admitted.static_uid in node.cpu_manager_state().entries, "the static pod kept its CPUs"
