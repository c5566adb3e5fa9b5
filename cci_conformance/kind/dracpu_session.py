"""One kind cluster running dra-driver-cpu on a faked worker: deploy, pause and restart the driver, observe the node."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..topology.model import Topology
from ..waiting import wait_for
from . import dracpu_log, dracpu_pods, dracpu_slices
from .cluster.lifecycle import KindCluster
from .cluster.node_access import RECORDER_LOG
from .cluster.pods import pause_image
from .dracpu_manifests import APP, DRIVER_NAME, NAMESPACE, DriverDeployment, objects
from .image import gobuild
from .runner import CommandFailed, run

# Node label the DaemonSet's selector gets while the driver is paused: no node has it, so the
# DaemonSet controller removes the driver pod (the way to take an NRI plugin away on purpose).
PAUSE_LABEL = "cci-conformance/dra-cpu-paused"
ASSETS = Path(__file__).parent / "image" / "assets"  # the node image's sources, the recorder among them
RECORDER_BINARY = "/usr/local/sbin/cpuset-recorder"  # containerd's runc BinaryName (node_files.py)
READY_TIMEOUT_S = 180


@dataclass(frozen=True)
class ClaimedPod:
    pod: str
    claims: tuple[str, ...]
    cpus: dict[str, frozenset[int]]  # claim -> allocated CPUs (API server; grouped mode: see claim_cpus)
    requested: int = 0  # CPUs the claims asked for in all


class DraCpuSession:
    """The worker under test, its driver DaemonSet, and the API-server and node views the checks read."""

    def __init__(self, cluster: KindCluster, node: str, topology: Topology, deployment: DriverDeployment):
        self.cluster = cluster
        self.node = node
        self.topology = topology
        self.deployment = deployment
        self.image = ""
        self.ready_seconds: float | None = None
        self.checkpoints: list[tuple[datetime, set[str]]] = []
        self.recorder_replaced = False
        self.start_spans: dict[str, float | None] = {}  # steady pods' scheduled-to-ready, for LAT-501

    # -- kubectl ---------------------------------------------------------------------------------
    def apply(self, *items: dict) -> None:
        self.cluster.kubectl("apply", "-f", "-", stdin=json.dumps(dracpu_pods.list_of(*items)))

    def get(self, kind: str, name: str = "", namespace: str = dracpu_pods.NAMESPACE) -> dict:
        args = ["get", kind] + ([name] if name else []) + ["-o", "json"]
        if kind not in ("resourceslices", "nodes"):
            args += ["-n", namespace]
        return json.loads(self.cluster.kubectl(*args))

    def delete(self, kind: str, *names: str, timeout: float = 120) -> None:
        if names:
            self.cluster.kubectl("delete", kind, *names, "-n", dracpu_pods.NAMESPACE, "--ignore-not-found",
                                 "--wait=true", f"--timeout={int(timeout)}s", timeout=timeout + 10)

    # -- the node --------------------------------------------------------------------------------
    def node_exec(self, *argv: str, timeout: float = 60) -> str:
        return run(["docker", "exec", self.node, *argv], timeout=timeout)

    def log_records(self) -> list[dracpu_log.Record]:
        text = self.node_exec("sh", "-c", f"cat {RECORDER_LOG} 2>/dev/null || true")
        return dracpu_log.parse(text)

    def containers(self) -> list[dict]:
        """Every container the node's runtime knows (crictl), running or exited."""
        return json.loads(self.node_exec("crictl", "ps", "-a", "-o", "json"))["containers"]

    def running_ids(self) -> set[str]:
        return {c["id"] for c in self.containers() if c["state"] == "CONTAINER_RUNNING"}

    def checkpoint(self) -> None:
        """Note which containers run now; the replay treats every other one created before as gone by then."""
        self.checkpoints.append((datetime.now(UTC), self.running_ids()))

    def stop_container(self, container_id: str) -> None:
        """Stop one container as a crash would (no grace); the kubelet restarts it per its pod's policy."""
        self.node_exec("crictl", "stop", "--timeout", "0", container_id)

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

    def deploy(self, archive: Path, image: str) -> None:
        """Load the image archive into the worker, apply RBAC, DeviceClass and DaemonSet, wait until ready."""
        self.image = image
        self.recorder_replaced = self.refresh_recorder()
        run([self.cluster.kind, "load", "image-archive", archive, "--name", self.cluster.plan.name,
             "--nodes", self.node], timeout=300, env=self.cluster._env())
        started = time.monotonic()
        self.apply(*objects(self.deployment))
        self.wait_driver_ready()
        self.wait_slices()
        self.ready_seconds = time.monotonic() - started

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

    def driver_diagnostics(self) -> str:
        """The driver pod's description and log, for a deployment that never became ready; never raises."""
        out = []
        for args in (("describe", "pods", "-n", NAMESPACE, "-l", f"app={APP}"),
                     ("logs", "-n", NAMESPACE, "-l", f"app={APP}", "--tail=60", "--all-containers")):
            try:
                out.append(self.cluster.kubectl(*args))
            except CommandFailed as exc:
                out.append(str(exc))
        return "\n".join(out)

    def save_artifacts(self, directory: Path) -> None:
        """The evidence behind the findings: recorder log, driver log, containerd and kubelet journals."""
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

    def published(self) -> dict[str, dict]:
        return dracpu_slices.devices(self.get("resourceslices")["items"], self.node, self.deployment.driver_name)

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

    # -- claims and pods -------------------------------------------------------------------------
    def pause(self) -> str:
        return pause_image(self.cluster, self.node)

    def wait_running(self, name: str, timeout: float = 120) -> dict:
        def running():
            found = self.get("pod", name)
            statuses = found["status"].get("containerStatuses", [])
            return found if statuses and all(s.get("state", {}).get("running") for s in statuses) else None
        return wait_for(running, timeout=timeout, interval=0.5, what=f"pod {name} running")

    def claimed_pod(self, name: str, counts: tuple[int, ...], *, restart: str = "Always",
                    timeout: float = 120, numa_node: int | None = None) -> ClaimedPod:
        """Claims of ``counts`` CPUs and a pod consuming them; waits until it runs."""
        names = tuple(f"{name}-c{i}" for i in range(len(counts)))
        grouped = self.deployment.device_mode == "grouped"
        self.apply(*[dracpu_pods.claim(c, n, grouped=grouped, numa_node=numa_node)
                     for c, n in zip(names, counts, strict=True)],
                   dracpu_pods.pod(name, self.node, self.pause(), names, restart=restart))
        self.wait_running(name, timeout)
        return ClaimedPod(name, names, self.claim_cpus(name, names), sum(counts))

    def claim_cpus(self, pod: str, claims: tuple[str, ...]) -> dict[str, frozenset[int]]:
        """Claim -> its CPUs: from the allocation's devices, or in `grouped` mode from the container's create.

        In `grouped` mode the driver picks the CPUs at preparation and the API names only the group
        device; the consuming container's first recorded create is the one place they show (CLAIM-501
        then checks their count). The union is held under the first claim.
        """
        if self.deployment.device_mode == "grouped":
            creates = dracpu_log.creates_of(self.log_records(), dracpu_pods.NAMESPACE, pod, "c0")
            union = (creates[0].cpus or frozenset()) if creates else frozenset()
            return {c: (union if i == 0 else frozenset()) for i, c in enumerate(claims)}
        cpu_of = dracpu_slices.device_cpus(self.published())
        return {c: dracpu_slices.allocated_cpus(self.get("resourceclaim", c), cpu_of) for c in claims}

    def shared_pod(self, name: str, *, wait: bool = True, timeout: float = 120) -> dict | None:
        self.apply(dracpu_pods.pod(name, self.node, self.pause()))
        return self.wait_running(name, timeout) if wait else None

    def pod_resource_devices(self, pod: str, container: str = "c0") -> dict[str, set[str]]:
        """Claim -> device names the kubelet's pod-resources API lists for one container (KEP-3695 dynamic_resources).

        The node container's kubelet socket is reached through its root under /proc (the harness runs
        as root beside docker), as the kind backend's session does.
        """
        import grpc

        from ..protocol.protos import podresources_v1_pb2 as pr
        from ..protocol.protos import podresources_v1_pb2_grpc as pr_grpc

        pid = run(["docker", "inspect", "-f", "{{.State.Pid}}", self.node], timeout=30).strip()
        with grpc.insecure_channel(f"unix:/proc/{pid}/root/var/lib/kubelet/pod-resources/kubelet.sock") as channel:
            reply = pr_grpc.PodResourcesListerStub(channel).List(pr.ListPodResourcesRequest(), timeout=10)
        out: dict[str, set[str]] = {}
        for p in reply.pod_resources:
            if (p.namespace, p.name) != (dracpu_pods.NAMESPACE, pod):
                continue
            for c in p.containers:
                if c.name == container:
                    for dyn in c.dynamic_resources:
                        out.setdefault(dyn.claim_name, set()).update(
                            r.device_name for r in dyn.claim_resources if r.driver_name == DRIVER_NAME)
        return out

    def pod_events(self, name: str) -> list[str]:
        out = self.cluster.kubectl("get", "events", "-n", dracpu_pods.NAMESPACE, "--field-selector",
                                   f"involvedObject.name={name}", "-o", "json")
        return [f"{e.get('reason')}: {e.get('message', '')}" for e in json.loads(out)["items"]]

    def cleanup(self, pods: list[str], claims: list[str]) -> None:
        self.delete("pod", *pods)
        self.delete("resourceclaim", *claims)

    def kubelet_metric(self, name: str) -> list[str]:
        """Lines of the kubelet's /metrics (through the API server's node proxy) for one metric."""
        try:
            text = self.cluster.kubectl("get", "--raw", f"/api/v1/nodes/{self.node}/proxy/metrics")
        except CommandFailed:
            return []
        return [line for line in text.splitlines() if line.startswith(name)]
