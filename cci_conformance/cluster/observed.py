"""A driver the cluster already runs as a DaemonSet of its own: the harness finds its pods and only observes them.

A vendor's cluster often runs its DRA CPU driver already (its Helm chart, its operator). Deploying the manifest's
image beside it would put two drivers of one name on a node; taking the DaemonSet over would change the vendor's
cluster. With `--driver-daemonset NAMESPACE/NAME` the run certifies the driver that runs: it never patches,
deletes or restarts that DaemonSet or its pods, so the suites that must take the driver away (driver restart and
stop) are untested with that reason (docs/cluster.md), never passed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import ConfigError
from ..kind.runner import CommandFailed
from .kube import Kube, labelled
from .worker import ClusterWorker

OPTION = "--driver-daemonset"
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")  # a DNS label: namespace and DaemonSet names
MODE_FLAG = "--cpu-device-mode"


@dataclass(frozen=True)
class DaemonSetRef:
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def parse_ref(text: str) -> DaemonSetRef:
    """``NAMESPACE/NAME``; ConfigError naming the option otherwise."""
    parts = text.split("/")
    if len(parts) != 2 or not all(_NAME.match(p) for p in parts):
        raise ConfigError(f"{text!r} is not NAMESPACE/NAME of a DaemonSet", field=OPTION,
                          fix=f"{OPTION} kube-system/dra-driver-cpu (kubectl get daemonsets -A lists them)")
    return DaemonSetRef(*parts)


def observed_reasons(ref: DaemonSetRef) -> dict[str, str]:
    """The session features an observed driver never offers, with the reason each test reports."""
    why = f"the driver is the cluster's own DaemonSet {ref} ({OPTION}), which the harness only observes"
    return {"driver-restart": f"{why}: it never deletes the driver's pods",
            "driver-stop": f"{why}: it never takes the driver off the node"}


def container_args(daemonset: dict) -> list[str]:
    containers = daemonset.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
    return [str(a) for c in containers for a in [*c.get("command", []), *c.get("args", [])]]


def image_of(daemonset: dict) -> str:
    """The image of the DaemonSet's (first) container: the driver's."""
    return daemonset["spec"]["template"]["spec"]["containers"][0]["image"]


def device_mode_of(daemonset: dict) -> str | None:
    """The ``--cpu-device-mode`` its containers are started with (dra-driver-cpu's flag), None when not given."""
    args = container_args(daemonset)
    for i, arg in enumerate(args):
        if arg.startswith(MODE_FLAG + "="):
            return arg.split("=", 1)[1]
        if arg == MODE_FLAG and i + 1 < len(args):
            return args[i + 1]
    return None


def node_pod(pods: list[dict], daemonset: dict, node: str) -> dict | None:
    """The DaemonSet's live pod on ``node``: owned by it (its uid), scheduled there, not terminating."""
    uid = daemonset["metadata"].get("uid")
    for pod in pods:
        owners = pod["metadata"].get("ownerReferences", [])
        if (any(o.get("kind") == "DaemonSet" and o.get("uid") == uid for o in owners)
                and pod.get("spec", {}).get("nodeName") == node and not pod["metadata"].get("deletionTimestamp")):
            return pod
    return None


def check(kube: Kube, ref: DaemonSetRef, nodes: list[str], device_mode: str | None) -> dict:
    """The DaemonSet, checked before the suites start: it exists, runs on every named node, in the run's device
    mode when its flags say one; ConfigError with the fix otherwise."""
    try:
        daemonset = kube.get_json("daemonset", ref.name, "-n", ref.namespace)
    except CommandFailed as exc:
        raise ConfigError(f"no DaemonSet {ref} in the cluster ({str(exc)[-200:]})", field=OPTION,
                          fix="name a DaemonSet that runs the driver (kubectl get daemonsets -A)") from None
    pods = kube.get_json("pods", "-n", ref.namespace)["items"]
    missing = [n for n in nodes if node_pod(pods, daemonset, n) is None]
    if missing:
        raise ConfigError(f"DaemonSet {ref} runs no pod on node {', '.join(missing)}", field=OPTION,
                          fix="name nodes the driver runs on, or let the DaemonSet schedule there")
    runs = device_mode_of(daemonset)
    wanted = device_mode or "individual"
    if runs is not None and runs != wanted:
        raise ConfigError(f"DaemonSet {ref} runs its driver with {MODE_FLAG}={runs}, the run asks for {wanted}",
                          field="--device-mode", fix=f"pass --device-mode {runs}")
    return daemonset


class ObservedWorker(ClusterWorker):
    """The node under test with the cluster's own driver pod on it: found, waited for, read; never changed."""

    def __init__(self, kube: Kube, node: str, deployment, helper, run_id: str, ref: DaemonSetRef, daemonset: dict):
        super().__init__(kube, node, deployment, helper, run_id)
        self.ref, self.daemonset = ref, daemonset  # as the session read it: its uid owns the driver's pods

    def deploy(self, archive=None) -> None:  # noqa: ARG002 - nothing is deployed
        self.ensure_device_class()
        self.wait_driver_ready()
        self.wait_slices(timeout=120)

    def ensure_device_class(self) -> None:
        """The suites' claims name the DeviceClass called after the driver: the cluster's own when it has one
        (left as it is), else one of the run's, labelled, which the run's sweep deletes."""
        from ..dra.deployment import device_class

        name = self.deployment.driver_name
        try:
            self.cluster.get_json("deviceclass", name)
            return
        except CommandFailed:
            pass
        self.apply(labelled(device_class(name), self.run_id))

    def driver_pod(self) -> dict | None:
        return node_pod(self.get("pods", namespace=self.ref.namespace)["items"], self.daemonset, self.node)

    def image_ids(self) -> list[str]:
        """The image digests the runtime runs the driver pod's containers from: what was certified."""
        pod = self.driver_pod() or {}
        return sorted({c.get("imageID", "") for c in pod.get("status", {}).get("containerStatuses", [])} - {""})

    def _terminating(self) -> bool:
        return False

    def pause_driver(self, timeout: float = 120) -> None:
        raise RuntimeError(observed_reasons(self.ref)["driver-stop"])

    def resume_driver(self) -> dict:
        raise RuntimeError(observed_reasons(self.ref)["driver-stop"])

    def restart_driver(self) -> dict:
        raise RuntimeError(observed_reasons(self.ref)["driver-restart"])

    def driver_log(self) -> str:
        pod = self.driver_pod()
        if pod is None:
            return f"no pod of DaemonSet {self.ref} on {self.node}"
        return self.cluster.kubectl("logs", "-n", self.ref.namespace, pod["metadata"]["name"], "--all-containers",
                                    "--tail=5000", timeout=120)

    def remove(self, timeout: float = 120) -> None:
        pass  # the DaemonSet is the cluster's; a DeviceClass the run made goes with its label (Kube.sweep)
