"""ResourceClaims and pods of the dra-cpu scenarios: exclusive CPU claims of the driver, and shared pods."""

from __future__ import annotations

from .dracpu_manifests import DRIVER_NAME

NAMESPACE = "default"
# resource.k8s.io/v1 (Kubernetes 1.34) caps one allocation at 32 devices (AllocationResultsMaxSize);
# in `individual` mode one device is one CPU, so a larger fill takes several claims.
MAX_DEVICES_PER_CLAIM = 32
CAPACITY = "dra.cpu/cpu"  # the group devices' consumable capacity in `grouped` mode (v0.2.0)


def claim(name: str, count: int, *, grouped: bool = False, numa_node: int | None = None) -> dict:
    """A ResourceClaim for exactly ``count`` CPUs of the driver.

    `individual` mode: ``count`` devices, one per CPU. `grouped` mode: one group device (a NUMA node
    or socket) and ``count`` of its consumable `dra.cpu/cpu` capacity (KEP-5075). ``numa_node``: only
    devices with that `numaNodeID` attribute (a CEL selector, so the scheduler picks one on that node).
    """
    if count < 1 or (count > MAX_DEVICES_PER_CLAIM and not grouped):  # grouped: one device, any capacity
        raise ValueError(f"a claim holds 1..{MAX_DEVICES_PER_CLAIM} devices, not {count}")
    exactly: dict = {"deviceClassName": DRIVER_NAME, "allocationMode": "ExactCount", "count": count}
    if grouped:
        exactly["count"] = 1
        exactly["capacity"] = {"requests": {CAPACITY: str(count)}}
    if numa_node is not None:
        domain = DRIVER_NAME  # attributes are published as dra.cpu/<name>; CEL reads them per domain
        exactly["selectors"] = [{"cel": {"expression": f'device.attributes["{domain}"].numaNodeID == {numa_node}'}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"devices": {"requests": [{"name": "cpus", "exactly": exactly}]}},
    }


def fill_counts(cpus: int) -> list[int]:
    """Claim sizes that together take ``cpus`` CPUs, each within the per-claim device cap."""
    counts = [MAX_DEVICES_PER_CLAIM] * (cpus // MAX_DEVICES_PER_CLAIM)
    return counts + ([cpus % MAX_DEVICES_PER_CLAIM] if cpus % MAX_DEVICES_PER_CLAIM else [])


def pod(name: str, node: str, image: str, claims: tuple[str, ...] = (), *, restart: str = "Always",
        wait_first: bool = False) -> dict:
    """One container ``c0`` on ``node``; with claims it consumes them all, without it is a shared-pool pod.

    The pod goes through the scheduler (a nodeSelector, not nodeName): only the scheduler allocates
    ResourceClaims (KEP-4381), a pod bound with nodeName would wait for an allocation forever.
    """
    container: dict = {"name": "c0", "image": image, "imagePullPolicy": "Never"}
    spec: dict = {
        "nodeSelector": {"kubernetes.io/hostname": node},
        "containers": [container],
        "terminationGracePeriodSeconds": 0,
        "restartPolicy": restart,
    }
    if wait_first:
        # An init container that runs until stopped: the kubelet prepares the pod's claims before any
        # of its containers (KEP-4381), so until then the claim is prepared and its container not created.
        spec["initContainers"] = [{"name": "wait", "image": image, "imagePullPolicy": "Never"}]
    if claims:
        spec["resourceClaims"] = [{"name": f"r{i}", "resourceClaimName": c} for i, c in enumerate(claims)]
        container["resources"] = {"claims": [{"name": f"r{i}"} for i in range(len(claims))]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}


def list_of(*items: dict) -> dict:
    """One document for `kubectl apply -f -`."""
    return {"apiVersion": "v1", "kind": "List", "items": list(items)}
