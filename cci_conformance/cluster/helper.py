"""A privileged helper pod on one node: the harness's hands there (nsenter into the node's namespaces)."""

from __future__ import annotations

import json

from ..kind.runner import CommandFailed
from ..waiting import wait_for
from .kube import Kube, labelled

HELPER_NAME = "cci-node-helper"
CONTAINER = "node"
READY_TIMEOUT_S = 120
# Enter every namespace of the node's init process: its mounts (the node's files, /sys, crictl, systemctl), and
# its PID, network, UTS and IPC namespaces (systemd's view of the kubelet unit).
NSENTER = ("nsenter", "-t", "1", "-m", "-u", "-i", "-n", "-p", "--")
# The helper runs the node's own pause image (pinned by the runtime, never pulled) with the node's own
# /usr, /bin, /sbin and /lib mounted over its empty root: nsenter and sh come from the node, so nothing is
# pulled from a registry and the node's loader finds its libraries where it expects them.
HOST_DIRS = {"amd64": ("/usr", "/bin", "/sbin", "/lib", "/lib64"), "arm64": ("/usr", "/bin", "/sbin", "/lib")}


class HelperRefused(RuntimeError):
    """The cluster would not run the privileged helper pod (admission, RBAC): node access is not allowed."""


def helper_pod(node: str, namespace: str, image: str, run_id: str, arch: str = "amd64",
               name: str = HELPER_NAME) -> dict:
    """The helper's manifest: privileged, hostPID, pinned to ``node``, tolerating every taint."""
    dirs = HOST_DIRS.get(arch)
    if dirs is None:
        raise ValueError(f"node {node} is {arch}; the helper knows the node layouts of {sorted(HOST_DIRS)}")
    volumes = [{"name": f"host{d.replace('/', '-')}", "hostPath": {"path": d, "type": "Directory"}} for d in dirs]
    mounts = [{"name": v["name"], "mountPath": v["hostPath"]["path"], "readOnly": True} for v in volumes]
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "hostPID": True,
            "tolerations": [{"operator": "Exists"}],
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "containers": [{"name": CONTAINER, "image": image, "imagePullPolicy": "IfNotPresent",
                            "securityContext": {"privileged": True}, "volumeMounts": mounts}],
            "volumes": volumes,
        },
    }
    return labelled(pod, run_id, node)


class NodeHelper:
    """The helper pod of one node: ``node_exec`` runs a command in the node's namespaces, with a deadline."""

    def __init__(self, kube: Kube, node: str, namespace: str, name: str = HELPER_NAME):
        self.kube, self.node, self.namespace, self.name = kube, node, namespace, name

    def start(self, image: str, run_id: str, arch: str = "amd64") -> NodeHelper:
        document = json.dumps(helper_pod(self.node, self.namespace, image, run_id, arch, self.name))
        try:
            self.kube.kubectl("apply", "-f", "-", stdin=document)
        except CommandFailed as exc:
            raise HelperRefused(f"the cluster refused the privileged helper pod on {self.node}: {exc}") from None
        try:
            wait_for(self._running, timeout=READY_TIMEOUT_S, interval=1.0,
                     what=f"helper pod {self.namespace}/{self.name} on {self.node} running")
        except TimeoutError as exc:
            raise HelperRefused(f"{exc}; events: {self._events()}") from None
        return self

    def _running(self) -> bool:
        pod = self.kube.get_json("pod", self.name, "-n", self.namespace)
        return pod.get("status", {}).get("phase") == "Running"

    def _events(self) -> list[str]:
        try:
            items = self.kube.get_json("events", "-n", self.namespace, "--field-selector",
                                       f"involvedObject.name={self.name}")["items"]
        except (CommandFailed, ValueError):
            return []
        return [f"{e.get('reason')}: {e.get('message', '')}" for e in items][-3:]

    def node_exec(self, *argv: str, timeout: float = 60) -> str:
        return self.kube.kubectl("exec", self.name, "-n", self.namespace, "-c", CONTAINER, "--", *NSENTER,
                                 *argv, timeout=timeout)

    def stop(self) -> None:
        self.kube.kubectl("delete", "pod", self.name, "-n", self.namespace, "--ignore-not-found",
                          "--wait=false", timeout=60)
