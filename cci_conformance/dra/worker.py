"""The kind worker under test and the driver's DaemonSet on it: the commands KindDraSession is made of."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..kind.cluster.cpuset_log import RECORDER_LOG, Record, parse
from ..kind.cluster.kube_api import KubeAPI, KubeAPIError
from ..kind.cluster.lifecycle import KindCluster
from ..kind.cluster.pods import pause_image
from ..kind.image import gobuild
from ..kind.image.nodeimage import ASSETS  # the node image's sources, the recorder among them
from ..kind.runner import CommandFailed, run
from ..waiting import wait_for
from .deployment import APP, NAMESPACE, DriverDeployment, objects
from .objects import NAMESPACE as POD_NS

# Node label the DaemonSet's selector gets while the driver is paused: no node has it, so the
# DaemonSet controller removes the driver pod (the way to take an NRI plugin away on purpose).
PAUSE_LABEL = "cci-conformance/dra-cpu-paused"
RECORDER_BINARY = "/usr/local/sbin/cpuset-recorder"  # containerd's runc BinaryName (node_files.py)
READY_TIMEOUT_S = 180


def published_devices(slices: list[dict], node: str, driver: str) -> dict[str, dict]:
    """Device name -> attribute values, over every ResourceSlice ``driver`` published for ``node``."""
    out: dict[str, dict] = {}
    for item in slices:
        spec = item.get("spec", {})
        if spec.get("driver") != driver or spec.get("nodeName") != node:
            continue
        for device in spec.get("devices", []):
            out[device["name"]] = {k: _value(v) for k, v in device.get("attributes", {}).items()}
    return out


def published_capacities(slices: list[dict], node: str, driver: str, key: str) -> dict[str, str]:
    """Device name -> its capacity ``key`` (a quantity), for the devices that have it (grouped mode's)."""
    out: dict[str, str] = {}
    for item in slices:
        spec = item.get("spec", {})
        if spec.get("driver") == driver and spec.get("nodeName") == node:
            for device in spec.get("devices", []):
                value = (device.get("capacity") or {}).get(key, {}).get("value")
                if value is not None:
                    out[device["name"]] = value
    return out


def _value(attribute: dict):
    for key in ("int", "bool", "string", "version"):
        if key in attribute:
            return attribute[key]
    return None


class Worker:
    """The worker under test, its driver DaemonSet, and the API-server and node views the session reads."""

    def __init__(self, cluster: KindCluster, node: str, deployment: DriverDeployment, api: KubeAPI | None = None):
        self.cluster = cluster
        self.node = node
        self.deployment = deployment
        # A kind session's API client: a call takes milliseconds where a kubectl process takes 300-540 ms of a
        # 2-core host's CPU (docs/kind.md), and the suites poll pods and claims all the time. Without one (the
        # cluster backend, whose kubectl maps the suites' namespace to the node's) every call is kubectl.
        self.api = api

    # -- the API server ----------------------------------------------------------------------------
    def apply(self, *items: dict) -> None:
        document = {"apiVersion": "v1", "kind": "List", "items": list(items)}  # one document for `apply -f -`
        self.cluster.kubectl("apply", "-f", "-", stdin=json.dumps(document))

    def create(self, *items: dict) -> None:
        """A pod's objects, claims first: created through the API where the worker has it, else applied."""
        if self.api is None:
            return self.apply(*items)
        for obj in items:
            try:
                self.api.create(obj)
            except KubeAPIError as exc:
                if exc.status != 409:
                    raise
                self.apply(obj)  # it exists (a template a test reuses): kubectl apply updates it, as it always did

    def get(self, kind: str, name: str = "", namespace: str = POD_NS) -> dict:
        if self.api is not None:
            return self.api.read(kind, name, namespace)
        args = ["get", kind] + ([name] if name else []) + ["-o", "json"]
        if kind not in ("resourceslices", "nodes"):
            args += ["-n", namespace]
        return json.loads(self.cluster.kubectl(*args))

    def find(self, kind: str, name: str, namespace: str = POD_NS) -> dict | None:
        """The object, or None when it does not exist."""
        if self.api is not None:
            try:
                return self.api.read(kind, name, namespace)
            except KubeAPIError as exc:
                if exc.status == 404:
                    return None
                raise
        out = self.cluster.kubectl("get", kind, name, "-n", namespace, "-o", "json", "--ignore-not-found")
        return json.loads(out) if out.strip() else None

    def delete(self, kind: str, *names: str, timeout: float = 120, wait: bool = True) -> None:
        """Delete the objects (gone ones are no error); with ``wait``, return once none of them exists."""
        if not names:
            return
        if self.api is None:
            self.cluster.kubectl("delete", kind, *names, "-n", POD_NS, "--ignore-not-found",
                                 f"--wait={str(wait).lower()}", f"--timeout={int(timeout)}s", timeout=timeout + 10)
            return
        for name in names:
            self.api.delete(kind, name, POD_NS)
        if wait:
            def gone() -> bool:
                left = {item["metadata"]["name"] for item in self.get(kind)["items"]}
                return not left.intersection(names)
            wait_for(gone, timeout=timeout, interval=0.2, what=f"{kind} {', '.join(names)} deleted")

    def pod_events(self, name: str) -> list[str]:
        if self.api is not None:
            items = self.api.pod_events(POD_NS, name)
        else:
            items = json.loads(self.cluster.kubectl("get", "events", "-n", POD_NS, "--field-selector",
                                                    f"involvedObject.name={name}", "-o", "json"))["items"]
        return [f"{e.get('reason')}: {e.get('message', '')}" for e in items]

    def kubelet_get(self, path: str, timeout: float = 60) -> str:
        """GET the kubelet's ``path`` (healthz, metrics) through the API server's node proxy."""
        if self.api is not None:
            return self.api.node_proxy(self.node, path, timeout=timeout)
        return self.cluster.kubectl("get", "--raw", f"/api/v1/nodes/{self.node}/proxy/{path}", timeout=timeout)

    def pause(self) -> str:
        """The node's own pause image: every test container runs it (nothing is pulled)."""
        return pause_image(self.cluster, self.node)

    # -- the node --------------------------------------------------------------------------------
    def node_exec(self, *argv: str, timeout: float = 60) -> str:
        return run(["docker", "exec", self.node, *argv], timeout=timeout)

    def log_records(self) -> list[Record]:
        text = self.node_exec("sh", "-c", f"cat {RECORDER_LOG} 2>/dev/null || true")
        return parse(text)

    def running_ids(self) -> set[str]:
        """Ids of the containers the node's runtime (crictl) has running."""
        containers = json.loads(self.node_exec("crictl", "ps", "-a", "-o", "json"))["containers"]
        return {c["id"] for c in containers if c["state"] == "CONTAINER_RUNNING"}

    def stop_container(self, container_id: str) -> None:
        """Stop one container as a crash would (no grace); the kubelet restarts it per its pod's policy."""
        self.node_exec("crictl", "stop", "--timeout", "0", container_id)

    def save_artifacts(self, directory: Path) -> None:
        """The evidence behind the verdicts: recorder log, driver log, containerd and kubelet journals."""
        directory.mkdir(parents=True, exist_ok=True)
        sources = {
            "cpusets.jsonl": ["docker", "exec", self.node, "sh", "-c", f"cat {RECORDER_LOG} || true"],
            "containerd.log": ["docker", "exec", self.node, "journalctl", "-u", "containerd", "--no-pager"],
            "kubelet.log": ["docker", "exec", self.node, "journalctl", "-u", "kubelet", "--no-pager"],
        }
        for name, argv in sources.items():
            try:
                (directory / name).write_text(run(argv, timeout=120))
            except CommandFailed as exc:
                (directory / name).write_text(str(exc))
        try:
            (directory / "driver.log").write_text(self.cluster.kubectl(
                "logs", "-n", NAMESPACE, "-l", f"app={APP}", "--tail=-1", timeout=120))
        except CommandFailed as exc:
            (directory / "driver.log").write_text(str(exc))

    # -- the driver ------------------------------------------------------------------------------
    def refresh_recorder(self) -> bool:
        """Put the cpuset recorder of the current sources on the worker when the image carries another.

        Node images built before the recorder understood go-runc's `update --resources=- <id>` record
        no update and fold none, so every NRI update of another container failed (ERANGE) and went
        unseen. containerd runs the recorder afresh for every runc call, so replacing the file (by a
        rename, never a partial write) takes effect for the next one. True when it was replaced.
        """
        binary = gobuild.build_local("cpuset-recorder", ASSETS / "cpuset-recorder.go")
        want = hashlib.sha256(binary.read_bytes()).hexdigest()
        have = self.node_exec("sh", "-c", f"sha256sum {RECORDER_BINARY} | cut -d' ' -f1").strip()
        if have == want:
            return False
        run(["docker", "cp", binary, f"{self.node}:{RECORDER_BINARY}.new"], timeout=60)
        self.node_exec("mv", "-f", f"{RECORDER_BINARY}.new", RECORDER_BINARY)
        return True

    def deploy(self, archive: Path) -> None:
        """Load the image archive into the worker, apply RBAC, DeviceClass and DaemonSet, wait until ready."""
        self.refresh_recorder()
        run([self.cluster.kind, "load", "image-archive", archive, "--name", self.cluster.plan.name,
             "--nodes", self.node], timeout=300, env=self.cluster._env())
        self.apply(*objects(self.deployment))
        self.wait_driver_ready()
        self.wait_slices()

    def driver_pod(self) -> dict | None:
        pods = self.get("pods", namespace=NAMESPACE)["items"]
        return next((p for p in pods if p["metadata"].get("labels", {}).get("app") == APP
                     and not p["metadata"].get("deletionTimestamp")), None)

    def wait_driver_ready(self, timeout: float = READY_TIMEOUT_S) -> dict:
        def ready():
            found = self.driver_pod()
            if found and any(c["type"] == "Ready" and c["status"] == "True"
                             for c in found["status"].get("conditions", [])):
                return found
            return None
        return wait_for(ready, timeout=timeout, interval=1.0, what=f"the {APP} pod on {self.node} Ready")

    def published(self) -> dict[str, dict]:
        return published_devices(self.get("resourceslices")["items"], self.node, self.deployment.driver_name)

    def published_with_capacity(self, key: str) -> tuple[dict[str, dict], dict[str, str]]:
        """Attributes and capacities ``key`` of the devices, from one read of the slices."""
        items, driver = self.get("resourceslices")["items"], self.deployment.driver_name
        return published_devices(items, self.node, driver), published_capacities(items, self.node, driver, key)

    def wait_slices(self, timeout: float = 60) -> dict[str, dict]:
        return wait_for(self.published, timeout=timeout, interval=1.0, what=f"ResourceSlices of {self.node}")

    def pause_driver(self, timeout: float = 120) -> None:
        """Take the driver away: the DaemonSet selects no node until resume_driver()."""
        patch = {"spec": {"template": {"spec": {"nodeSelector": {PAUSE_LABEL: "true"}}}}}
        self.cluster.kubectl("patch", "daemonset", APP, "-n", NAMESPACE, "--type=merge", "-p", json.dumps(patch))
        wait_for(lambda: not any(p["metadata"].get("labels", {}).get("app") == APP
                                 for p in self.get("pods", namespace=NAMESPACE)["items"]),
                 timeout=timeout, interval=1.0, what=f"the {APP} pod gone")

    def resume_driver(self) -> dict:
        patch = [{"op": "remove", "path": f"/spec/template/spec/nodeSelector/{PAUSE_LABEL.replace('/', '~1')}"}]
        self.cluster.kubectl("patch", "daemonset", APP, "-n", NAMESPACE, "--type=json", "-p", json.dumps(patch))
        return self.wait_driver_ready()

    def restart_driver(self) -> dict:
        """Delete the driver pod; the DaemonSet makes a new one (a driver crash or upgrade as the node sees it)."""
        old = self.driver_pod()
        self.cluster.kubectl("delete", "pod", old["metadata"]["name"], "-n", NAMESPACE, "--wait=true",
                             "--timeout=120s", timeout=130)
        return self.wait_driver_ready()
