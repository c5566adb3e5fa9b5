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
from cci_conformance.kind import cci_deploy, cci_manifests, pods
from cci_conformance.kind.differential import Step, g
from cci_conformance.kind.nodeaccess import NodeAccess
from cci_conformance.node.api import ClaimRef, ContainerSpec, PodSpec
from cci_conformance.topology import library
from cci_conformance.waiting import wait_for

pytestmark = pytest.mark.kind

X4 = {"cores": ["4"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-REQUIRED"]]}
X3 = {"cores": ["3"], "cpu attributes": [["EXCLUSIVE"]]}
DENIED_SHARED = {"cores": ["1", "2"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-DENIED"], ["SHARED"]]}
TOO_BIG = {"cores": ["40"], "cpu attributes": [["EXCLUSIVE"]]}
# (pod name, claim parameters | Guaranteed CPUs | None = delete): claims and static pods interleaved,
# deletions of both, an odd exclusive count, withheld siblings, a shared group, a refusal.
STEPS = [
    ("xd-c4", X4), ("xd-g4", ("4",)), ("xd-cds", DENIED_SHARED), ("xd-g2", ("2",)), ("xd-c4", None),
    ("xd-c3", X3), ("xd-big", TOO_BIG), ("xd-g3", ("3",)), ("xd-g4", None), ("xd-c4b", X4), ("xd-cds", None),
    ("xd-g6", ("6",)),
]


def _on_kubelet(cluster, node: NodeAccess):
    image = pods.pause_image(cluster, node.node)
    outcomes, states, uids, claims, cci = {}, [], {}, {}, []
    for name, what in STEPS:
        if what is None:
            cluster.kubectl("delete", "pod", name, "--wait=true", "--timeout=120s", timeout=130)
            wait_for(lambda uid=uids[name]: uid not in node.cpu_manager_state().entries
                     and uid not in {r["podUID"] for r in node.cci_manager_state()["containers"]},
                     timeout=120, interval=0.5, what=f"the kubelet to release {name}")
        elif isinstance(what, dict):
            cluster.kubectl("apply", "-f", "-", stdin=json.dumps(cci_manifests.resource_claim(name, DRIVER, what)))
            cluster.kubectl("apply", "-f", "-", stdin=json.dumps(cci_manifests.claim_pod(name, name, node.node, image)))
            pod = cci_deploy.wait_pod(cluster, name)
            uids[name] = pod["metadata"]["uid"]
            claims[name] = cluster.kubectl("get", "resourceclaim", name, "-o", "jsonpath={.metadata.uid}")
            outcomes[name] = "admitted" if pod["status"]["phase"] == "Running" else pod["status"].get("reason", "")
        else:
            admitted = pods.create_and_wait(cluster, Step(name, g(*what)).pod(""), node.node, image)
            uids[name] = admitted.uid
            outcomes[name] = "admitted" if admitted.phase == "Running" else admitted.reason
        states.append(node.state_bytes())
        cci.append(_comparable(node.cci_manager_state()))
    return outcomes, states, uids, claims, cci


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


def _on_embedded(uids: dict[str, str], claims: dict[str, str]):
    profile = {**INTEL_PROFILE, "cci": True}
    workdir = Path(tempfile.mkdtemp(prefix="cci-", dir="/tmp"))  # short: unix sockets live here
    session = EmbeddedBackend().open(SessionConfig(library.load(INTEL), profile, GO_REFERENCE, workdir))
    outcomes, states, cci = {}, [], []
    try:
        for name, what in STEPS:
            if what is None:
                session.delete_pod(uids[name])
            else:
                if isinstance(what, dict):
                    # The claim is named as its ResourceClaim on kind (claim_name, kubelet-cci "Claims").
                    pod = PodSpec(pods.NAMESPACE, name, uids[name], (ContainerSpec("c0", claim=name),),
                                  (ClaimRef(name, claims[name], what),))
                else:
                    pod = Step(name, g(*what)).pod(uids[name])
                result = session.create_pod(pod)
                outcomes[name] = "admitted" if result.admitted else result.reason
            states.append(session.state_files().get("cpu_manager_state", b""))
            cci.append(_comparable(json.loads(session.persisted_state().cci_content)))
    finally:
        session.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return outcomes, states, cci


def test_claims_and_static_pods_agree_with_the_embedded_node(cluster, intel_worker, cci_driver):
    node = NodeAccess(intel_worker)
    wait_for(lambda: not node.cpu_manager_state().entries, timeout=60, interval=0.5,
             what=f"{intel_worker} to have no exclusive assignments")
    created = {name for name, what in STEPS if what is not None}
    try:
        real_outcomes, real_states, uids, claims, real_cci = _on_kubelet(cluster, node)
    finally:
        for name in created:
            cluster.kubectl("delete", "pod", name, "--ignore-not-found", "--wait=false")
            cluster.kubectl("delete", "resourceclaim", name, "--ignore-not-found")
    ours_outcomes, ours_states, ours_cci = _on_embedded(uids, claims)
    assert real_outcomes == ours_outcomes
    assert real_outcomes["xd-big"] == "CCIAdmitError" and list(real_outcomes.values()).count("admitted") == 8
    # Not vacuous: the CCI grants are cpu_manager_state entries on both sides (spec S3.5, one store).
    assert uids["xd-c4"].encode() in real_states[0] and uids["xd-cds"].encode() in real_states[2]
    for i, ((name, what), real, ours) in enumerate(zip(STEPS, real_states, ours_states, strict=True)):
        assert real == ours, f"step {i} ({name} {what}): kubelet {real.decode()}\n  embedded {ours.decode()}"
    for i, ((name, what), real, ours) in enumerate(zip(STEPS, real_cci, ours_cci, strict=True)):
        assert real == ours, f"cci_manager_state after step {i} ({name} {what}):\n  kubelet {real}\n  embedded {ours}"
