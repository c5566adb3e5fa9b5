"""A cluster node under test and the driver's DaemonSet on it: kind's Worker with node access through the helper."""

from __future__ import annotations

import json
from pathlib import Path

from ..dra.deployment import APP, NAMESPACE, DriverDeployment, objects
from ..dra.worker import Worker
from ..kind.cluster.cpuset_log import RECORDER_LOG, Record
from ..kind.runner import CommandFailed
from ..waiting import wait_for
from . import cgroup_log
from .helper import NodeHelper
from .kube import NODE_LABEL, RUN_LABEL, Kube, _label_value, labelled


def daemonset_name(node: str) -> str:
    """One DaemonSet per node: two nodes of one run deploy side by side, each pinned to its own."""
    return f"{APP}-{_label_value(node)}"[:63].strip("-.")


def node_objects(deployment: DriverDeployment, run_id: str) -> list[dict]:
    """The driver's objects (RBAC, DeviceClass, DaemonSet) for one node, labelled with the run; the DaemonSet
    named and selected by node, its image pulled as the vendor's nodes would (IfNotPresent)."""
    out = []
    node_label = {NODE_LABEL: _label_value(deployment.node_name)}
    for obj in objects(deployment):
        if obj["kind"] == "DaemonSet":
            obj["metadata"]["name"] = daemonset_name(deployment.node_name)
            obj["spec"]["selector"]["matchLabels"].update(node_label)
            obj["spec"]["template"]["metadata"]["labels"].update(node_label)
            obj["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "IfNotPresent"
        out.append(labelled(obj, run_id, deployment.node_name if obj["kind"] == "DaemonSet" else ""))
    return out


class ClusterWorker(Worker):
    """The node under test of an existing cluster. Everything it creates carries the run's label."""

    def __init__(self, kube: Kube, node: str, deployment: DriverDeployment, helper: NodeHelper, run_id: str):
        super().__init__(kube, node, deployment)  # type: ignore[arg-type] - Kube has KindCluster's kubectl()
        self.helper, self.run_id = helper, run_id
        self.ds_name = daemonset_name(node)
        self.recorder: bool | None = None  # the node runs the harness's cpuset recorder (our node images)
        self.polled = cgroup_log.PolledLog()

    def apply(self, *items: dict) -> None:
        super().apply(*(labelled(i, self.run_id) for i in items))

    def node_exec(self, *argv: str, timeout: float = 60) -> str:
        return self.helper.node_exec(*argv, timeout=timeout)

    def log_records(self) -> list[Record]:
        if self.recorder is None:
            self.recorder = self.node_exec("sh", "-c", f"test -f {RECORDER_LOG} && echo yes || true").strip() == "yes"
        if self.recorder:
            return super().log_records()
        snapshot = cgroup_log.parse_snapshot(self.node_exec("sh", "-c", cgroup_log.SNAPSHOT_SCRIPT))
        names = cgroup_log.identities(self.node_exec("crictl", "ps", "-o", "json"))
        return list(self.polled.observe(snapshot, names))

    def effective_cpus(self, container_id: str) -> str:
        return self.node_exec("sh", "-c", cgroup_log.EFFECTIVE_SCRIPT, "effective", container_id).strip()

    def refresh_recorder(self) -> bool:
        return False  # a node of someone else's cluster is never changed

    def deploy(self, archive: Path | None = None) -> None:  # noqa: ARG002 - the image comes from the registry
        made = node_objects(self.deployment, self.run_id)
        taken = [name for name in (self.foreign(obj) for obj in made) if name]
        if taken:  # applying would relabel the cluster's own objects, and the run's sweep would then delete them
            raise RuntimeError(f"{', '.join(taken)} already exist(s) in the cluster and were not made by this run; "
                               "the harness will not take them over: certify the driver that runs with "
                               "--driver-daemonset NAMESPACE/NAME, or remove them first (docs/cluster.md)")
        self.apply(*made)
        self.wait_driver_ready()
        self.wait_slices(timeout=120)

    def foreign(self, obj: dict) -> str:
        """``kind/name`` of ``obj`` when the cluster has it without this run's label (made by someone else)."""
        meta = obj["metadata"]
        where = ("-n", meta["namespace"]) if meta.get("namespace") else ()
        try:
            found = self.cluster.get_json(obj["kind"].lower(), meta["name"], *where)
        except CommandFailed:
            return ""  # not there: the run makes it
        if found["metadata"].get("labels", {}).get(RUN_LABEL) == self.run_id:
            return ""
        return f"{obj['kind']} {meta['name']}"

    def driver_pod(self) -> dict | None:
        pods = self.get("pods", namespace=NAMESPACE)["items"]
        return next((p for p in pods if p["metadata"].get("labels", {}).get(NODE_LABEL) == _label_value(self.node)
                     and p["metadata"].get("labels", {}).get("app") == APP
                     and p.get("spec", {}).get("nodeName") == self.node
                     and not p["metadata"].get("deletionTimestamp")), None)

    def pause_driver(self, timeout: float = 120) -> None:
        from ..dra.worker import PAUSE_LABEL

        patch = {"spec": {"template": {"spec": {"nodeSelector": {PAUSE_LABEL: "true"}}}}}
        self.cluster.kubectl("patch", "daemonset", self.ds_name, "-n", NAMESPACE, "--type=merge",
                             "-p", json.dumps(patch))
        wait_for(lambda: self.driver_pod() is None and not self._terminating(), timeout=timeout, interval=1.0,
                 what=f"the driver pod of {self.node} gone")

    def _terminating(self) -> bool:
        """A pod of this run's DaemonSet on the node, live or terminating (another driver's pods never count: a
        cluster may run its own with the same app label)."""
        pods = self.get("pods", namespace=NAMESPACE)["items"]
        mine = {"app": APP, NODE_LABEL: _label_value(self.node)}
        return any(p.get("spec", {}).get("nodeName") == self.node
                   and mine.items() <= p["metadata"].get("labels", {}).items() for p in pods)

    def resume_driver(self) -> dict:
        from ..dra.worker import PAUSE_LABEL

        patch = [{"op": "remove", "path": f"/spec/template/spec/nodeSelector/{PAUSE_LABEL.replace('/', '~1')}"}]
        self.cluster.kubectl("patch", "daemonset", self.ds_name, "-n", NAMESPACE, "--type=json",
                             "-p", json.dumps(patch))
        return self.wait_driver_ready()

    def save_artifacts(self, directory: Path) -> None:
        """Recorder log (when the node has one), containerd and kubelet journals, the driver's log."""
        directory.mkdir(parents=True, exist_ok=True)
        sources = {
            "cpusets.jsonl": f"cat {RECORDER_LOG} 2>/dev/null || true",
            "containerd.log": "journalctl -u containerd --no-pager -n 5000 2>&1 || true",
            "kubelet.log": "journalctl -u kubelet --no-pager -n 5000 2>&1 || true",
        }
        for name, script in sources.items():
            try:
                (directory / name).write_text(self.node_exec("sh", "-c", script, timeout=120))
            except CommandFailed as exc:
                (directory / name).write_text(str(exc))
        try:
            (directory / "driver.log").write_text(self.driver_log())
        except CommandFailed as exc:
            (directory / "driver.log").write_text(str(exc))

    def driver_log(self) -> str:
        return self.cluster.kubectl("logs", "-n", NAMESPACE, "-l", f"{NODE_LABEL}={_label_value(self.node)}",
                                    "--tail=-1", timeout=120)

    def remove(self, timeout: float = 120) -> None:
        """Delete this node's DaemonSet and wait until its pod is gone (the driver's slices go with it)."""
        self.cluster.kubectl("delete", "daemonset", self.ds_name, "-n", NAMESPACE, "--ignore-not-found",
                             "--wait=true", f"--timeout={int(timeout)}s", timeout=timeout + 10)
        wait_for(lambda: not self._terminating(), timeout=timeout, interval=1.0,
                 what=f"the driver pod of {self.node} gone")
