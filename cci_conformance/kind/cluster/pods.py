"""Pods for kind e2e runs: manifests pinned to a node, created one at a time and awaited to a final phase."""

from __future__ import annotations

import json
from dataclasses import dataclass

from ...node.api import ContainerSpec, PodSpec
from ...waiting import wait_for
from .lifecycle import KindCluster

# The pause image is in every node (pinned at build time): containers need no registry.
NAMESPACE = "default"


@dataclass(frozen=True)
class AdmittedPod:
    name: str
    uid: str
    phase: str
    reason: str


def manifest(name: str, node: str, containers: tuple[ContainerSpec, ...], image: str) -> dict:
    specs = []
    for c in containers:
        requests = {k: v for k, v in (("cpu", c.cpu_request), ("memory", c.memory_request)) if v}
        limits = {k: v for k, v in (("cpu", c.cpu_limit), ("memory", c.memory_limit)) if v}
        resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
        specs.append({"name": c.name, "image": image, "imagePullPolicy": "Never", "resources": resources})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        # nodeName skips the scheduler: the kubelet of that node admits the pod (CPU manager included).
        "spec": {"nodeName": node, "containers": specs, "terminationGracePeriodSeconds": 0,
                 "restartPolicy": "Never"},
    }


def pause_image(cluster: KindCluster, node: str) -> str:
    """The sandbox image the node's containerd is configured with (present and pinned)."""
    out = cluster.kubectl("get", "node", node, "-o", "json")
    for image in json.loads(out)["status"].get("images", []):
        for name in image.get("names", []):
            if "/pause:" in name:
                return name
    raise RuntimeError(f"node {node} reports no pause image")


def create_and_wait(cluster: KindCluster, pod: PodSpec, node: str, image: str, timeout: float = 120) -> AdmittedPod:
    """Create the pod and wait until it runs or the kubelet rejected it (phase Failed)."""
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(manifest(pod.name, node, pod.containers, image)))

    def settled():
        status = json.loads(cluster.kubectl("get", "pod", pod.name, "-n", NAMESPACE, "-o", "json"))
        phase = status["status"].get("phase", "")
        containers = status["status"].get("containerStatuses", [])
        if phase == "Running" and all(s.get("state", {}).get("running") for s in containers):
            return AdmittedPod(pod.name, status["metadata"]["uid"], phase, "")
        if phase == "Failed":
            # Admission rejections carry the reason on the pod (e.g. SMTAlignmentError); start errors on a container.
            reason = status["status"].get("reason") or next(
                (f"{t['reason']}: {t.get('message', '')}" for s in containers
                 if (t := s.get("state", {}).get("terminated"))), "Failed")
            return AdmittedPod(pod.name, status["metadata"]["uid"], phase, reason)
        return None

    return wait_for(settled, timeout=timeout, interval=0.5, what=f"pod {pod.name} running or rejected")


def delete(cluster: KindCluster, name: str, timeout: float = 120) -> None:
    cluster.kubectl("delete", "pod", name, "-n", NAMESPACE, "--wait=true", f"--timeout={int(timeout)}s",
                    timeout=timeout + 10)
