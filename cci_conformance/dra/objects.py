"""The Kubernetes objects of a PodSpec: its ResourceClaims or ResourceClaimTemplates and the pod consuming them."""

from __future__ import annotations

import json

from .api import ClaimSpec, PodSpec

NAMESPACE = "default"
# Not 0: a pod whose grace period is 0 is removed from the API server at once, while the kubelet still stops its
# containers and has not unprepared its claims (it does that before it reports the pod stopped). The claim is then
# deallocated and its CPUs given to the next claim while the old container still runs on them, and a driver that
# refuses the overlap is blamed for the harness's haste (LAT-601 measured 89 s pod starts so). With a grace period
# the object stays until the kubelet confirms; pause exits on SIGTERM, so this costs no wait.
TERMINATION_GRACE_S = 5


def capacity_key(driver: str) -> str:
    """The group devices' consumable capacity: CPUs, in the driver's domain (dra-driver-cpu's dra.cpu/cpu; the
    scheduler matches a request to a device's capacity by this exact name)."""
    return f"{driver}/cpu"


def _request(claim: ClaimSpec, driver: str, device_mode: str) -> dict:
    if device_mode == "grouped":
        # one group device (a NUMA node), ``count`` CPUs of its capacity: the scheduler keeps the sum of the
        # shares within it (KEP-5075), the driver picks which CPUs at NodePrepareResources
        exactly: dict = {"deviceClassName": driver, "allocationMode": "ExactCount", "count": 1,
                         "capacity": {"requests": {capacity_key(driver): str(claim.count)}}}
    else:
        exactly = {"deviceClassName": driver, "allocationMode": "ExactCount", "count": claim.count}
    selectors = []
    # dra-driver-cpu publishes its attributes in its own domain (dra.cpu/numaNodeID, dra.cpu/socketID)
    if claim.numa_node is not None:
        selectors.append(f'device.attributes["{driver}"].numaNodeID == {claim.numa_node}')
    if claim.socket is not None:
        selectors.append(f'device.attributes["{driver}"].socketID == {claim.socket}')
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    devices: dict = {"requests": [{"name": "cpus", "exactly": exactly}]}
    if claim.opaque:
        # handed to the driver as is at NodePrepareResources (status.allocation.devices.config)
        devices["config"] = [{"requests": ["cpus"],
                              "opaque": {"driver": driver, "parameters": json.loads(claim.opaque)}}]
    return {"devices": devices}


def claim_object(claim: ClaimSpec, driver: str, device_mode: str = "individual") -> dict:
    spec = _request(claim, driver, device_mode)
    if claim.template:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": claim.name, "namespace": NAMESPACE}, "spec": {"spec": spec}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": claim.name, "namespace": NAMESPACE}, "spec": spec}


def pod_objects(pod: PodSpec, node: str, image: str, driver: str, device_mode: str = "individual") -> list[dict]:
    """Claims first, then the pod. It goes through the scheduler (a nodeSelector): only the scheduler allocates
    claims (KEP-4381), a pod bound by nodeName would wait for an allocation for ever."""
    refs = [{"name": c.name, **({"resourceClaimTemplateName": c.name} if c.template else {"resourceClaimName": c.name})}
            for c in pod.claims]
    refs += [{"name": name, "resourceClaimName": name} for name in pod.existing_claims]
    containers = []
    for c in pod.containers:
        entry: dict = {"name": c.name, "image": image, "imagePullPolicy": "Never"}
        resources: dict = {}
        if c.claims:
            resources["claims"] = [{"name": name} for name in c.claims]
        if c.guaranteed_cpus:
            amount = {"cpu": str(c.guaranteed_cpus), "memory": "64Mi"}
            resources["requests"], resources["limits"] = amount, dict(amount)
        if resources:
            entry["resources"] = resources
        containers.append(entry)
    spec: dict = {"nodeSelector": {"kubernetes.io/hostname": node}, "containers": containers,
                  "terminationGracePeriodSeconds": TERMINATION_GRACE_S, "restartPolicy": pod.restart}
    if refs:
        spec["resourceClaims"] = refs
    if pod.hold_init:
        spec["initContainers"] = [{"name": "hold", "image": image, "imagePullPolicy": "Never"}]
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod.name, "namespace": NAMESPACE},
                "spec": spec}
    return [*(claim_object(c, driver, device_mode) for c in pod.claims), manifest]
