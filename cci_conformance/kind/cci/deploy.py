"""Deploy a CCI driver onto a kind worker with the patched kubelet, and read what it and the kubelet did."""

from __future__ import annotations

import json
import re
import time
import zlib
from pathlib import Path

from ...waiting import wait_for
from ..cluster.lifecycle import KindCluster
from ..cluster.node_access import NodeAccess
from . import manifests
from .manifests import CCIDriverDeployment

STATE_LOG = "go-reference-state.log"  # the Go reference's state file under {state_dir} (its state.go)
_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


class RegistrationRefused(RuntimeError):
    """The kubelet refused the driver's registration (the reason is the kubelet's, from the driver's log)."""


def driver_pod(cluster: KindCluster, plan: CCIDriverDeployment) -> str:
    """The name of the driver's running pod ("" while there is none)."""
    selector = f"cci-driver={plan.driver_name},cci-node={plan.node_name}"
    pods = json.loads(cluster.kubectl("get", "pods", "-n", manifests.NAMESPACE, "-l", selector,
                                      "-o", "json"))["items"]
    running = [p["metadata"]["name"] for p in pods
               if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
    return running[0] if running else ""


def driver_log(cluster: KindCluster, plan: CCIDriverDeployment) -> str:
    pod = driver_pod(cluster, plan)
    return cluster.kubectl("logs", "-n", manifests.NAMESPACE, pod) if pod else ""


def deploy(cluster: KindCluster, plan: CCIDriverDeployment, archive: Path, slots: int,
           timeout: float = 120) -> float:
    """Load the image, apply class, slice and DaemonSet, and wait until the kubelet accepted the driver's
    registration; returns the seconds from apply to registration."""
    cluster.load_archive(archive, [plan.node_name])
    return apply_and_register(cluster, plan, manifests.objects(plan, slots), timeout)


def kubelet_registrations(node: str, driver: str, since: float) -> list[str | None]:
    """The kubelet's answers to ``driver``'s registrations since ``since`` (epoch s), from its journal: None for
    a registration, the reason for a refusal (kubelet-cci registry.go logs both, for any driver)."""
    from .node_view import kubelet_registrations as parse
    from .node_view import node_exec

    text = node_exec(node, f"journalctl -u kubelet -o short-unix --no-pager --since @{int(since)} "
                           "| grep 'CCI driver ' || true")
    return parse(text, since, driver)


def apply_and_register(cluster: KindCluster, plan: CCIDriverDeployment, items: list[dict], timeout: float) -> float:
    """Apply the driver's objects and wait until the kubelet answered its registration (RegistrationRefused when
    it refused); returns the seconds from apply to registration."""
    started, since = time.monotonic(), time.time()
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    answers = wait_for(lambda: kubelet_registrations(plan.node_name, plan.driver_name, since), timeout=timeout,
                       interval=0.5, what=f"the kubelet of {plan.node_name} to answer CCI driver "
                                          f"{plan.driver_name}'s registration")
    if answers[-1] is not None:  # named, so the run's startup probe blames the driver (certify/probe.py)
        raise RegistrationRefused(f"the kubelet of {plan.node_name} refused CCI driver {plan.driver_name}'s "
                                  f"registration: {answers[-1]}")
    return time.monotonic() - started


def slice_exists(cluster: KindCluster, plan: CCIDriverDeployment) -> bool:
    out = cluster.kubectl("get", "resourceslices", "--field-selector", f"spec.nodeName={plan.node_name}",
                          "-o", "jsonpath={.items[*].metadata.name}")
    return f"{plan.node_name}-{plan.driver_name}" in out.split()


def republish_slice(cluster: KindCluster, plan: CCIDriverDeployment, slots: int) -> None:
    """Publish the worker's slice again: a starting kubelet deletes every ResourceSlice of its node (its DRA
    manager's start-up wipe, so that no pod waits for a driver that may never come back)."""
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(
        manifests.resource_slice(plan.driver_name, plan.node_name, slots)))


def undeploy(cluster: KindCluster, plan: CCIDriverDeployment, timeout: float = 120) -> None:
    """Delete the DaemonSet and wait until the driver removed its registration socket (SIGTERM, spec S1.9),
    so the kubelet has deregistered it; then the slice and the class."""
    node = NodeAccess(plan.node_name)
    cluster.kubectl("delete", "daemonset", "-n", manifests.NAMESPACE, "-l",
                    f"cci-driver={plan.driver_name},cci-node={plan.node_name}",
                    "--ignore-not-found", "--wait=true", f"--timeout={int(timeout)}s", timeout=timeout + 10)
    wait_for(lambda: not node.host.file(plan.registration_socket).exists, timeout=timeout, interval=0.5,
             what=f"{plan.registration_socket} to disappear")
    for kind, name in (("resourceslice", f"{plan.node_name}-{plan.driver_name}"), ("deviceclass", plan.driver_name)):
        cluster.kubectl("delete", kind, name, "--ignore-not-found")


def driver_state_changes(text: str) -> list[dict]:
    """The Go reference's state log, one ``<crc32 hex> <JSON>`` line per change; every CRC is verified."""
    changes = []
    for number, line in enumerate(text.splitlines(), 1):
        crc, _, body = line.partition(" ")
        if int(crc, 16) != zlib.crc32(body.encode()) & 0xFFFFFFFF:
            raise ValueError(f"{STATE_LOG} line {number}: CRC mismatch")
        changes.append(json.loads(body))
    return changes


def driver_admissions(changes: list[dict]) -> dict[tuple[str, str], dict]:
    """The driver's live admissions by (pod UID, container) after replaying its state log."""
    live: dict[tuple[str, str], dict] = {}
    for change in changes:
        for admission in change.get("set") or ():
            live[(admission["pod"], admission["container"])] = admission
        for pod, container in change.get("del") or ():
            live.pop((pod, container), None)
    return live


def driver_state(plan: CCIDriverDeployment) -> list[dict]:
    path = f"{plan.state_dir}/{STATE_LOG}"
    file = NodeAccess(plan.node_name).host.file(path)
    return driver_state_changes(file.content_string) if file.exists else []


def metric_samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Samples of one metric in the Prometheus text format, keyed by their sorted labels."""
    out = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line.strip())
        if match and match["name"] == name:
            labels = tuple(sorted(_LABEL.findall(match["labels"] or "")))
            out[labels] = float(match["value"])
    return out


def wait_pod(cluster: KindCluster, name: str, namespace: str = "default", timeout: float = 120) -> dict:
    """Wait until the pod's containers all run, or it failed (a kubelet admission refusal); returns the pod."""
    def settled():
        pod = json.loads(cluster.kubectl("get", "pod", name, "-n", namespace, "-o", "json"))
        phase = pod["status"].get("phase", "")
        statuses = pod["status"].get("containerStatuses", [])
        if phase == "Failed" or (phase == "Running" and statuses and all(s["state"].get("running") for s in statuses)):
            return pod
        return None
    return wait_for(settled, timeout=timeout, interval=0.5, what=f"pod {name} running or failed")


def kubelet_metrics(cluster: KindCluster, node: str) -> str:
    """The kubelet's /metrics through the API server's node proxy (the admin kubeconfig may read it)."""
    return cluster.kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/metrics")
