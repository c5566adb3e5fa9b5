"""Differential check with CCI: claim and static pods on the patched kubelet and on the embedded node, same driver."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from kind_plans import DRIVER, GO_REFERENCE, INTEL, INTEL_PROFILE

from cci_conformance.backends.base import SessionConfig
from cci_conformance.backends.embedded import EmbeddedBackend
from cci_conformance.cpuset import format_cpulist
from cci_conformance.kind.cci import deploy, manifests
from cci_conformance.kind.cluster import pods
from cci_conformance.kind.cluster.node_access import NodeAccess
from cci_conformance.kind.differential import Step, g
from cci_conformance.node.api import ClaimRef, ContainerSpec, PodSpec
from cci_conformance.topology import library
from cci_conformance.waiting import WaitTimeout, wait_for

pytestmark = pytest.mark.kind

X4 = {"cores": ["4"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-REQUIRED"]]}
X3 = {"cores": ["3"], "cpu attributes": [["EXCLUSIVE"]]}
DENIED_SHARED = {"cores": ["1", "2"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-DENIED"], ["SHARED"]]}
TOO_BIG = {"cores": ["40"], "cpu attributes": [["EXCLUSIVE"]]}
# The other attributes the Go reference declares (driver.yaml: numa-bind, numa-interleave, core-ranges, groups,
# core-siblings): memory bound to one node, a core range interleaved, an odd count of whole cores (S2.4: the
# driver refuses it, the claims' SMT rejection), three groups with one attribute of each kind.
BIND = {"cores": ["2"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-REQUIRED"]],
        "mem attributes": ["NUMA-MEM-AFFINITY-BIND-REQUIRED"]}
RANGE_INTERLEAVE = {"cores": ["2-4"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-PREFERRED"]],
                    "mem attributes": ["NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED"]}
ODD_WHOLE_CORES = {"cores": ["3"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-REQUIRED"]]}
GROUPS = {"cores": ["2", "1", "1"],
          "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-REQUIRED"], ["EXCLUSIVE", "CORE-SIBLING-PREFERRED"],
                             ["SHARED"]],
          "mem attributes": ["NUMA-MEM-AFFINITY-BIND-PREFERRED", "NUMA-MEM-AFFINITY-INTERLEAVE-PREFERRED",
                             "NO-MEM-AFFINITY"]}
# (pod name, claim parameters | Guaranteed CPUs | None = delete): claims and static pods interleaved,
# deletions of both, an odd exclusive count, withheld siblings, a shared group, refusals. No static pod is
# SMT-rejected here: the driver's worker runs without full-pcpus-only (INTEL_PROFILE), so the kubelet admits odd
# Guaranteed pods; test_kind_differential.py rejects them on the full-pcpus-only worker, without a driver.
STEPS = [
    ("xd-c4", X4), ("xd-g4", ("4",)), ("xd-cds", DENIED_SHARED), ("xd-g2", ("2",)), ("xd-c4", None),
    ("xd-c3", X3), ("xd-big", TOO_BIG), ("xd-g3", ("3",)), ("xd-g4", None), ("xd-c4b", X4), ("xd-cds", None),
    ("xd-g6", ("6",)), ("xd-bind", BIND), ("xd-ilv", RANGE_INTERLEAVE), ("xd-odd", ODD_WHOLE_CORES),
    ("xd-grp", GROUPS), ("xd-bind", None), ("xd-g1", ("1",)), ("xd-ilv", None), ("xd-grp", None),
]
REFUSED = {"xd-big", "xd-odd"}
# A claim of one SHARED group only (spec S2.2: CPUs of the shared pool, nothing exclusive), then a static pod.
SHARED_ONLY = {"cores": ["2"], "cpu attributes": [["SHARED"]]}
SHARED_STEPS = [("xs-sh", SHARED_ONLY), ("xs-g2", ("2",)), ("xs-sh", None), ("xs-g2", None)]
# The kubelet moves containers whose cpuset a step changed indirectly (shared-pool and SHARED-group containers)
# in its CPU manager's reconcile loop, every cpuManagerReconcilePeriod (10 s by default); the embedded node does
# it at once (docs/spec.md S3.3). The runtime's cpusets are compared once they converged, within two periods.
RECONCILE_WAIT_S = 25.0


def _kubelet_step(cluster, node: NodeAccess, image: str, name: str, what, uids: dict, claims: dict, outcomes: dict):
    if what is None:
        cluster.kubectl("delete", "pod", name, "--wait=true", "--timeout=120s", timeout=130)
        wait_for(lambda uid=uids[name]: uid not in node.cpu_manager_state().entries
                 and uid not in {r["podUID"] for r in node.cci_manager_state()["containers"]},
                 timeout=120, interval=0.5, what=f"the kubelet to release {name}")
    elif isinstance(what, dict):
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(manifests.resource_claim(name, DRIVER, what)))
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(manifests.claim_pod(name, name, node.node, image)))
        pod = deploy.wait_pod(cluster, name)
        uids[name] = pod["metadata"]["uid"]
        claims[name] = cluster.kubectl("get", "resourceclaim", name, "-o", "jsonpath={.metadata.uid}")
        outcomes[name] = "admitted" if pod["status"]["phase"] == "Running" else pod["status"].get("reason", "")
    else:
        admitted = pods.create_and_wait(cluster, Step(name, g(*what)).pod(""), node.node, image)
        uids[name] = admitted.uid
        outcomes[name] = "admitted" if admitted.phase == "Running" else admitted.reason


def _embedded_step(session, name: str, what, uids: dict, claims: dict, outcomes: dict):
    if what is None:
        session.delete_pod(uids[name])
        return
    if isinstance(what, dict):
        # The claim is named as its ResourceClaim on kind (claim_name, kubelet-cci "Claims").
        pod = PodSpec(pods.NAMESPACE, name, uids[name], (ContainerSpec("c0", claim=name),),
                      (ClaimRef(name, claims[name], what),))
    else:
        pod = Step(name, g(*what)).pod(uids[name])
    result = session.create_pod(pod)
    outcomes[name] = "admitted" if result.admitted else result.reason


def _recorded(node: NodeAccess, ours: set[str]) -> dict[str, str]:
    """"<pod>/<container>" -> the cpuset the kubelet last asked the runtime for (the recorder's log, fake CPU
    ids), for the running containers of this test's pods (the log keeps deleted ones)."""
    running = node.running_container_ids()
    return {f"{c.pod_name}/{c.container_name}": format_cpulist(c.requested)
            for cid, c in node.recorded_cpusets().items() if cid in running and c.pod_uid in ours}


def _comparable(data: dict) -> dict:
    """cci_manager_state's CCI records, without what must differ between the nodes: container ids (two runtimes)
    and the driver's name (registered under a DRA name on kind). The embedded node's snapshot also carries
    a generation, a journal epoch and the cpu_manager_state checksums; the kubelet writes whole files."""
    # Records of CCI containers only: the embedded node's snapshot is its whole store (S3.5), static and shared
    # containers included; the kubelet keeps those in its static policy's state alone (cpu_manager_state,
    # compared byte for byte above).
    content = {"mode": data["mode"], "pending": data["pending"],
               "containers": [r for r in data["containers"] if r["source"] == "cci"]}
    for entry in content["containers"] + content["pending"]:
        entry["containerID"] = "<id>" if entry.get("containerID") else ""
        entry["driver"] = "<driver>"
    return content


def _both_sides(cluster, worker: str, steps, profile: dict | None = None):
    """Each step on the patched kubelet, then on the embedded node (node profile ``profile``, by default the
    worker's coexistence one) fed the API server's UIDs; what each recorded after every step: (outcomes,
    cpu_manager_state, CCI records, runtime cpusets) per side (test_kind_cci_alpha.py runs it in alpha)."""
    node = NodeAccess(worker)
    wait_for(lambda: not node.cpu_manager_state().entries, timeout=60, interval=0.5,
             what=f"{worker} to have no exclusive assignments")
    image = pods.pause_image(cluster, node.node)
    uids, claims = {}, {}
    real, ours = ({}, [], [], []), ({}, [], [], [])
    workdir = Path(tempfile.mkdtemp(prefix="cci-", dir="/tmp"))  # short: unix sockets live here
    session = EmbeddedBackend().open(SessionConfig(library.load(INTEL), profile or {**INTEL_PROFILE, "cci": True},
                                                   GO_REFERENCE, workdir))
    try:
        for name, what in steps:
            _kubelet_step(cluster, node, image, name, what, uids, claims, real[0])
            _embedded_step(session, name, what, uids, claims, ours[0])
            real[1].append(node.state_bytes())
            real[2].append(_comparable(node.cci_manager_state()))
            ours[1].append(session.state_files().get("cpu_manager_state", b""))
            ours[2].append(_comparable(json.loads(session.persisted_state().cci_content)))
            # What the embedded node's runtime applied (its cgroup-like cpuset files), by the same identity.
            expected = {f"{c.pod_name}/{c.container}": format_cpulist(c.runtime_cpus)
                        for c in session.snapshot().containers if c.running}
            ours[3].append(expected)
            mine = set(uids.values())
            try:
                wait_for(lambda m=mine, e=expected: _recorded(node, m) == e, timeout=RECONCILE_WAIT_S, interval=0.5,
                         what="the kubelet's reconcile loop to apply the step's cpusets")
            except WaitTimeout:
                pass  # _assert_agree names the step and both sides' cpusets
            real[3].append(_recorded(node, mine))
    finally:
        session.close()
        shutil.rmtree(workdir, ignore_errors=True)
        for name in {name for name, what in steps if what is not None}:
            cluster.kubectl("delete", "pod", name, "--ignore-not-found", "--wait=false")
            cluster.kubectl("delete", "resourceclaim", name, "--ignore-not-found")
    return real, ours, uids


def _assert_agree(steps, real, ours) -> None:
    """Admission outcomes, cpu_manager_state bytes, CCI records and the runtime's cpusets, after every step."""
    assert real[0] == ours[0]
    labels = ("cpu_manager_state", "cci_manager_state", "runtime cpusets")
    for label, real_seq, ours_seq in zip(labels, real[1:], ours[1:], strict=True):
        for i, ((name, what), kubelet, embedded) in enumerate(zip(steps, real_seq, ours_seq, strict=True)):
            assert kubelet == embedded, (f"{label} after step {i} ({name} {what}):\n"
                                         f"  kubelet  {kubelet}\n  embedded {embedded}")


def test_claims_and_static_pods_agree_with_the_embedded_node(cluster, intel_worker, cci_driver):
    real, ours, uids = _both_sides(cluster, intel_worker, STEPS)
    outcomes, states, _, cpusets = real
    assert {name: outcomes[name] for name in REFUSED} == dict.fromkeys(REFUSED, "CCIAdmitError")
    assert list(outcomes.values()).count("admitted") == len(outcomes) - len(REFUSED)
    # Not vacuous: the CCI grants are cpu_manager_state entries on both sides (spec S3.5, one store), and the
    # runtime was asked for cpusets of every running container of the test's pods.
    assert uids["xd-c4"].encode() in states[0] and uids["xd-cds"].encode() in states[2]
    assert set(cpusets[-1]) == {"xd-g2/c0", "xd-c3/c0", "xd-g3/c0", "xd-c4b/c0", "xd-g6/c0", "xd-g1/c0"}
    _assert_agree(STEPS, real, ours)


def test_shared_only_claim_agrees_with_the_embedded_node(cluster, intel_worker, cci_driver):
    """A SHARED-only grant holds nothing: no cpu_manager_state entry on either side (spec S3.5); the patched
    kubelet used to write an empty one ({"c0": ""}), found by this test."""
    real, ours, _ = _both_sides(cluster, intel_worker, SHARED_STEPS)
    assert real[0] == {"xs-sh": "admitted", "xs-g2": "admitted"}
    _assert_agree(SHARED_STEPS, real, ours)
