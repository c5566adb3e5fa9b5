"""The DRA session on kind: a vanilla-kubelet worker with a faked machine, the driver of a dra/v1 manifest on it."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from ..cpuset import CPUs
from ..drivers.manifest import load_manifest
from ..kind.cci.driver_image import file_digest
from ..kind.cluster import toolchain
from ..kind.cluster.config import ClusterPlan, NodePlan
from ..kind.cluster.cpuset_log import Record
from ..kind.cluster.kube_api import KubeAPI, KubeAPIError
from ..kind.cluster.lifecycle import KindCluster, owned_name
from ..kind.image import nodeimage, versions
from ..kind.runner import CommandFailed
from ..node.profile import parse_config
from ..waiting import wait_for
from . import driver_image, kubelet_state
from .api import (
    FEATURES,
    REFUSAL_GRACE_S,
    Allocation,
    ContainerState,
    Device,
    DraSessionConfig,
    KubeletCheckpoints,
    KubeletMetrics,
    PodRefused,
    PodSpec,
    PodState,
    RefusalWatch,
)
from .deployment import NAMESPACE, DriverDeployment
from .objects import NAMESPACE as POD_NS
from .objects import capacity_key, pod_objects
from .worker import Worker

# The faked machine is shown to the driver only (its sysfs hostPaths point here); with policy none the kubelet
# sees the real host, which it needs: it writes every CPU it sees into the kubepods cpuset (docs/dra-cpu.md).
MACHINE_ROOT = "/var/lib/cci-machine"
KUBELET_TIMEOUT_S = 120
STANDARD_NUMA = "resource.kubernetes.io/numaNode"


def qualified(attributes: dict, driver: str) -> dict:
    """Attribute names as the scheduler reads them: resource.k8s.io's QualifiedName puts a name without a domain
    prefix in the driver's domain, so `cpuID` published by driver D and `D/cpuID` are one attribute (dra-driver-cpu
    publishes qualified names, our reference unqualified ones)."""
    return {name if "/" in name else f"{driver}/{name}": value for name, value in attributes.items()}


class KindDraSession:
    """One kind cluster made for one (machine, profile); the driver's deployment comes from its dra/v1 manifest."""

    backend_name = "kind"

    def __init__(self, cluster: KindCluster, worker: Worker, config: DraSessionConfig, driver_name: str):
        self.cluster, self.worker, self.config = cluster, worker, config
        self.topology, self.profile, self.node = config.topology, config.profile, worker.node
        self.driver_name, self.device_mode = driver_name, config.device_mode
        self.facts: dict[str, str] = {}
        # the kubelet sees the real host under policy none: its cgroups say nothing about the faked CPUs
        self.features = frozenset(FEATURES) - {"cpuset-effective"}
        self._pause = ""
        self._deleted_while_down: list[tuple[str, list[str]]] | None = None  # a list while the kubelet is stopped

    @classmethod
    def open(cls, config: DraSessionConfig) -> KindDraSession:
        manifest = load_manifest(config.driver_manifest)
        release = versions.release(config.kubernetes)
        built = driver_image.build(manifest)
        image = nodeimage.default_image(release)
        if not nodeimage.image_exists(image):
            raise RuntimeError(f"node image {image} is missing; fix: cci-conformance kind build-node-image "
                               f"--kubernetes {release.kubernetes}")
        static = config.profile.policy == "static"
        profile = parse_config({"mode": "coexistence", "cpuManagerPolicy": "static", "cci": False,
                                "reservedSystemCPUs": ",".join(map(str, sorted(config.profile.reserved)))}) \
            if static else None
        # under the static policy the kubelet pins Guaranteed pods: it must see the machine the driver sees
        worker = NodePlan("worker", config.topology, profile, machine_root="/" if static else MACHINE_ROOT)
        name = owned_name("cci-dra", str(abs(hash((config.topology.name, config.profile.name))) % 1000))
        plan = ClusterPlan(name, image, [NodePlan("control-plane"), worker], release=release)
        cluster = KindCluster(plan, kind=toolchain.kind_binary(release), kubectl=toolchain.kubectl_binary(release))
        try:
            cluster.create()
            cluster.wait_ready()
            node = plan.node_names()[1]
            sysfs = "/sys" if static else MACHINE_ROOT + "/sys"
            deployment = DriverDeployment(built.reference, node, device_mode=config.device_mode,
                                          program=built.program, driver_name=built.driver_name,
                                          extra_args=built.args,
                                          hybrid=bool(config.topology.core_types), node_sysfs=sysfs,
                                          reserved_cpus=config.profile.reserved)
            worker = Worker(cluster, node, deployment, api=KubeAPI(cluster.kubeconfig))
            worker.deploy(built.archive)
        except BaseException:
            cluster.delete()
            raise
        session = cls(cluster, worker, config, built.driver_name)
        # report.json run.backend_facts, in the shape the CCI kind backend gives them (report.schema.json)
        session.facts = {"node_image": image, "clusters": [name],
                         "driver_image": {"reference": built.reference, "origin": built.origin,
                                          "archive_sha256": file_digest(built.archive)}}
        return session

    # -- pods and claims --------------------------------------------------------------------------
    def _pause_image(self) -> str:
        self._pause = self._pause or self.worker.pause()
        return self._pause

    def create_pod(self, pod: PodSpec, *, wait: bool = True, timeout: float = 120,
                   refusal_grace: float | None = REFUSAL_GRACE_S) -> PodState:
        self.worker.create(*pod_objects(pod, self.node, self._pause_image(), self.driver_name, self.device_mode))
        if wait:
            refusal = RefusalWatch(refusal_grace)
            try:
                # an API read costs milliseconds; a kubectl one (an existing cluster's view) a process
                state = wait_for(lambda: refusal.settled(self.pod(pod.name, events=False)), timeout=timeout,
                                 interval=0.1 if self.worker.api is not None else 0.5, what=f"pod {pod.name} running")
            except TimeoutError as exc:
                raise TimeoutError(f"{exc}; events: {self.pod(pod.name).events[-3:]}") from None
            if not state.running:
                raise PodRefused(f"pod {pod.name} will not start: {refusal.describe()}; "
                                 f"events: {self.pod(pod.name).events[-3:]}")
        return self.pod(pod.name)

    def pod(self, name: str, *, events: bool = True) -> PodState:
        """The pod as the API server has it; ``events=False`` spares a polling loop one kubectl call a round."""
        raw = self.worker.get("pod", name)
        status = raw.get("status", {})
        # a pod's claim references by their names in the pod, resolved to ResourceClaims (templates: by status)
        resolved = {c["name"]: c["resourceClaimName"] for c in raw["spec"].get("resourceClaims", [])
                    if c.get("resourceClaimName")}
        resolved |= {s["name"]: s["resourceClaimName"] for s in status.get("resourceClaimStatuses", []) or []
                     if s.get("resourceClaimName")}
        consumes = {c["name"]: tuple(resolved.get(r["name"], r["name"])
                                     for r in (c.get("resources") or {}).get("claims", []))
                    for c in raw["spec"]["containers"]}
        containers = tuple(ContainerState(c["name"], c.get("containerID", "").split("://")[-1],
                                          bool(c.get("state", {}).get("running")), c.get("restartCount", 0),
                                          consumes.get(c["name"], ()), _waiting(c))
                           for c in status.get("containerStatuses", []))
        if not containers:
            containers = tuple(ContainerState(c["name"], "", False, claims=consumes[c["name"]])
                               for c in raw["spec"]["containers"])
        claims = tuple(s.get("resourceClaimName", "") for s in status.get("resourceClaimStatuses", []) or [])
        claims += tuple(c["resourceClaimName"] for c in raw["spec"].get("resourceClaims", [])
                        if c.get("resourceClaimName"))
        return PodState(name, raw["metadata"]["uid"], status.get("phase", ""), containers, tuple(dict.fromkeys(claims)),
                        tuple(self.worker.pod_events(name)) if events else (), _start_seconds(status))

    def delete_pod(self, name: str, *, timeout: float = 120) -> None:
        self.delete_pods([name], timeout=timeout)

    def delete_pods(self, names: Sequence[str], *, timeout: float = 120) -> None:
        """The pods and the claims made for them (named ``<pod>-...``), all asked at once, awaited together."""
        made: dict[str, list[str]] = {}
        for name in names:
            raw = self.worker.find("pod", name) or {}
            made[name] = [c["resourceClaimName"] for c in raw.get("spec", {}).get("resourceClaims", [])
                          if c.get("resourceClaimName", "").startswith(name + "-")]
        if self._deleted_while_down is not None:
            # a deletion waits for the kubelet to confirm the pod stopped: with the kubelet down that is only
            # once it is back (start_kubelet waits for it then)
            self.worker.delete("pod", *names, wait=False)
            self._deleted_while_down += list(made.items())
            return
        self.worker.delete("pod", *names, timeout=timeout)
        self.worker.delete("resourceclaim", *(c for claims in made.values() for c in claims), timeout=timeout)

    def allocation(self, claim: str) -> Allocation:
        raw = self.worker.get("resourceclaim", claim)
        results = ((raw.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])
        mine = [r for r in results if r.get("driver") == self.driver_name]
        cpu_of = {d.name: d.cpu for d in self.slices()}
        cpus = frozenset(cpu_of[r["device"]] for r in mine if cpu_of.get(r["device"]) is not None)
        reserved = tuple(r.get("name", "") for r in (raw.get("status") or {}).get("reservedFor", []) or [])
        key = capacity_key(self.driver_name)
        shares = tuple((r["device"], _cpus_of(r["consumedCapacity"][key])) for r in mine
                       if key in (r.get("consumedCapacity") or {}))
        return Allocation(claim, bool(results), tuple(r["device"] for r in mine), cpus, reserved, shares)

    def slices(self) -> tuple[Device, ...]:
        out = []
        devices, quantities = self.worker.published_with_capacity(capacity_key(self.driver_name))
        capacity = {name: _cpus_of(value) for name, value in quantities.items()}
        for name, published in sorted(devices.items()):
            attrs = qualified(published, self.driver_name)
            cpu, numa, socket, core = (attrs.get(f"{self.driver_name}/{key}")
                                       for key in ("cpuID", "numaNodeID", "socketID", "coreID"))
            if numa is None:  # the standard attribute (KEP-6072) where the driver publishes no own one
                numa = attrs.get(STANDARD_NUMA)
            out.append(Device(name, cpu, numa, socket, core, tuple(sorted(attrs.items())),
                              capacity.get(name)))
        return tuple(out)

    def cpuset_records(self) -> tuple[Record, ...]:
        return tuple(self.worker.log_records())

    def running_container_ids(self) -> frozenset[str]:
        return frozenset(self.worker.running_ids())

    # -- the kubelet, the driver, a container --------------------------------------------------------
    def _kubelet_pid(self) -> str:
        return self.worker.node_exec("systemctl", "show", "-p", "MainPID", "--value", "kubelet").strip()

    def _wait_kubelet(self, old_pid: str) -> None:
        def back() -> bool:
            pid = self._kubelet_pid()
            return pid not in ("", "0", old_pid) and self._kubelet_healthy()
        wait_for(back, timeout=KUBELET_TIMEOUT_S, interval=1.0, what=f"the kubelet of {self.node} back and healthy")
        # the restarted kubelet re-registers the driver (plugin watcher) before it prepares anything new
        self.worker.wait_slices()

    def _kubelet_healthy(self) -> bool:
        # through the API server's node proxy (the kubelet's port 10250), as the CCI session asks: the vanilla
        # node image has no curl, and a kubelet the API server cannot reach is not back for the suites either
        try:
            return self.worker.kubelet_get("healthz", timeout=10).strip() == "ok"
        except (CommandFailed, KubeAPIError, OSError):
            return False  # the proxy answers 5xx while the kubelet starts

    def restart_kubelet(self, hard: bool = True) -> None:
        old = self._kubelet_pid()
        if hard:
            self.worker.node_exec("kill", "-9", old)  # systemd restarts it (Restart=always, kubelet.service)
        else:
            self.worker.node_exec("systemctl", "restart", "kubelet")
        self._wait_kubelet(old)

    def stop_kubelet(self) -> None:
        self._stopped_pid = self._kubelet_pid()
        self.worker.node_exec("systemctl", "stop", "kubelet")
        self._deleted_while_down = []

    def start_kubelet(self) -> None:
        self.worker.node_exec("systemctl", "start", "kubelet")
        self._wait_kubelet(getattr(self, "_stopped_pid", ""))
        pending, self._deleted_while_down = self._deleted_while_down or [], None
        for name, made in pending:
            self.worker.delete("pod", name, timeout=KUBELET_TIMEOUT_S)
            self.worker.delete("resourceclaim", *made, timeout=KUBELET_TIMEOUT_S)

    def restart_driver(self, hard: bool = True) -> None:
        if hard:
            pod = self.worker.driver_pod()
            self.cluster.kubectl("delete", "pod", pod["metadata"]["name"], "-n", NAMESPACE, "--grace-period=0",
                                 "--force", timeout=60)
            self.worker.wait_driver_ready()
        else:
            self.worker.restart_driver()
        self.worker.wait_slices()

    def stop_driver(self) -> None:
        self.worker.pause_driver()

    def start_driver(self) -> None:
        self.worker.resume_driver()
        self.worker.wait_slices()

    def stop_container(self, pod: str, container: str) -> None:
        self.worker.stop_container(self.pod(pod).container(container).container_id)

    # -- what the kubelet keeps --------------------------------------------------------------------
    def effective_cpus(self, pod: str, container: str) -> CPUs:
        raise NotImplementedError("cpuset-effective: the kubelet of this worker sees the host, not the faked machine")

    def checkpoints(self) -> KubeletCheckpoints:
        dra = self.worker.node_exec("sh", "-c", f"cat {kubelet_state.DRA_STATE_PATH} 2>/dev/null || true")
        cpu = self.worker.node_exec("cat", kubelet_state.CPU_STATE_PATH)
        return kubelet_state.checkpoints(dra, cpu.encode())

    def metrics(self) -> KubeletMetrics:
        text = self.worker.kubelet_get("metrics", timeout=60)
        # kind's nodes are containers on this host: their processes wait in its run queue
        load = os.getloadavg()[1] / (os.cpu_count() or 1)
        return replace(kubelet_state.metrics(text, self.driver_name), host_load_per_cpu=round(load, 2))

    def collect_evidence(self, dest: Path) -> list[Path]:
        """Recorder log, kubelet/containerd journals, driver log, the kubelet's two state files, pods and claims."""
        self.worker.save_artifacts(dest)
        sources = {
            "dra_manager_state": ("sh", "-c", f"cat {kubelet_state.DRA_STATE_PATH} 2>&1 || true"),
            "cpu_manager_state": ("sh", "-c", f"cat {kubelet_state.CPU_STATE_PATH} 2>&1 || true"),
        }
        for name, argv in sources.items():
            try:
                (dest / name).write_text(self.worker.node_exec(*argv))
            except CommandFailed as exc:
                (dest / name).write_text(str(exc))
        try:
            (dest / "pods-and-claims.yaml").write_text(self.cluster.kubectl(
                "get", "pods,resourceclaims", "-n", POD_NS, "-o", "yaml", timeout=120))
        except CommandFailed as exc:
            (dest / "pods-and-claims.yaml").write_text(str(exc))
        return sorted(dest.iterdir())

    def close(self) -> None:
        try:
            self.cluster.delete()
        finally:
            if self.worker.api is not None:
                self.worker.api.close()


def _cpus_of(quantity: str | int) -> int:
    """A CPU count as the API server writes a quantity ("4"; a whole count never has a suffix here)."""
    try:
        return int(quantity)
    except ValueError:
        raise ValueError(f"capacity {quantity!r} is not a whole number of CPUs") from None


def _waiting(container_status: dict) -> str:
    """"<reason>: <message>" of a container status's waiting state (ContainerState.waiting), "" when not waiting."""
    waiting = (container_status.get("state") or {}).get("waiting") or {}
    if not waiting:
        return ""
    return f"{waiting.get('reason', '')}: {' '.join(str(waiting.get('message', '')).split())}"


def _start_seconds(status: dict) -> float | None:
    """PodScheduled -> Ready, from the pod's own condition times (second resolution, as the API keeps them)."""
    times = {c["type"]: c.get("lastTransitionTime") for c in status.get("conditions", []) if c.get("status") == "True"}
    if not times.get("PodScheduled") or not times.get("Ready"):
        return None

    def at(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    return (at(times["Ready"]) - at(times["PodScheduled"])).total_seconds()

