"""A PodSpec as Kubernetes objects: the pod, and one ResourceClaim per claim with its parameters as opaque config."""

from __future__ import annotations

from ...node.api import PodSpec
from . import manifests

# Every object the backend creates carries it (value: the pod's name), so a session finds what it must delete.
LABEL = "cci-conformance.io/backend-pod"
NODE_LABEL = "cci-conformance.io/node"  # the worker a pod and its claims belong to (a run has one per machine)
TEST_UID = "cci-conformance.io/test-uid"  # annotation: the PodSpec's uid, which the API server replaces


def claim_name(pod_name: str, claim: str) -> str:
    return f"{pod_name}-{claim}"[:63].rstrip("-")


def claim_objects(pod: PodSpec, name: str, driver: str, node: str = "") -> list[dict]:
    """One ResourceClaim per ClaimRef, its parameters as the opaque config of the CCI driver, as the kubelet
    reads them (kubelet-cci/README.md "Claims", docs/spec.md S3.9)."""
    out = []
    for claim in pod.claims:
        obj = manifests.resource_claim(claim_name(name, claim.name), driver, claim.parameters, pod.namespace)
        obj["metadata"]["labels"] = {LABEL: name, **({NODE_LABEL: node} if node else {})}
        out.append(obj)
    return out


def pod_object(pod: PodSpec, name: str, node: str, image: str) -> dict:
    """The pod on ``node``: claim pods through the scheduler (DRA allocates only for pods it schedules, kept on
    the worker by a node selector), others straight to the kubelet with nodeName."""
    containers = []
    for c in pod.containers:
        requests = {k: v for k, v in (("cpu", c.cpu_request), ("memory", c.memory_request)) if v}
        limits = {k: v for k, v in (("cpu", c.cpu_limit), ("memory", c.memory_limit)) if v}
        resources: dict = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
        if c.claim:
            resources["claims"] = [{"name": c.claim}]
        containers.append({"name": c.name, "image": image, "imagePullPolicy": "Never", "resources": resources})
    # The host's network: a CPU test needs no pod network, and a sandbox then waits on no CNI plugin and no
    # IP address range (which churn of thousands of pods per run could exhaust).
    spec: dict = {"containers": containers, "terminationGracePeriodSeconds": 0, "restartPolicy": "Never",
                  "hostNetwork": True}
    if pod.claims:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
        spec["resourceClaims"] = [{"name": c.name, "resourceClaimName": claim_name(name, c.name)} for c in pod.claims]
    else:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": pod.namespace, "labels": {LABEL: name, NODE_LABEL: node},
                         "annotations": {TEST_UID: pod.uid}},
            "spec": spec}


def sandbox_stalled(pod: dict | None) -> bool:
    """True when the kubelet admitted ``pod`` (it synced it past admission: the PodReadyToStartContainers
    condition exists) but the runtime has not started its sandbox. The CCI driver has no part in that step:
    the patched kubelet calls it at admission and after the runtime created a container (kubelet-cci/README.md)."""
    if pod is None or pod["status"].get("phase") not in ("Pending", None):
        return False
    conditions = {c.get("type"): c.get("status") for c in pod["status"].get("conditions", [])}
    return conditions.get("PodReadyToStartContainers") == "False"
