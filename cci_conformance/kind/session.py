"""A NodeSession over the run's kind worker: pods and claims through the API server, the ledger from the node."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from ..cpuset import CPUs, parse_cpulist
from ..drivers.manifest import load_manifest
from ..node.api import AdmissionResult, NodeSnapshot, PersistedState, PodSpec
from ..node.checkpoint import CCI_STATE_FILE, CPU_STATE_FILE, canonical
from ..node.persisted import VOLATILE
from ..waiting import wait_for
from . import cci_deploy, cci_manifests, node_view, pods
from .kind_pods import LABEL, claim_objects, pod_object, settled
from .node_view import NodeRead, node_exec, read_node
from .run_cluster import RunCluster
from .session_ledger import assignments, containers_of, effective, exclusive_map

POD_TIMEOUT_S = 120  # scheduling (DRA allocation) + admission + sandbox start on a loaded 2-CPU host
RELEASE_TIMEOUT_S = 120  # the kubelet's release after a deletion: container stop, PostStop, Remove
KUBELET_TIMEOUT_S = 120


class KindSession:
    """The run's worker with its driver DaemonSet (docs/kind.md "Backend kind (first cut)")."""

    backend_name = "kind"
    # None of the optional hooks: the kubelet is a systemd unit that restarts itself (no node-stop), the driver
    # runs in a pod (no pause without the runtime's freezer, not wired yet), and its socket is inside the node.
    features = frozenset()

    def __init__(self, config):
        if config.driver_manifest is None:
            raise NotImplementedError("the kind backend's first cut always runs the driver DaemonSet; a node "
                                      "without a CCI driver is not offered (docs/kind.md)")
        self.topology = config.topology
        self.manifest = load_manifest(config.driver_manifest)
        self.run = RunCluster.for_session(config.topology, config.node_profile, self.manifest)
        self.cluster, self.node, self.plan = self.run.cluster, self.run.worker, self.run.deployment
        self.driver = self.plan.driver_name
        # The API server gives every pod its own uid, which is the one the kubelet, its checkpoints and this
        # session report; the PodSpec's uid is kept as an alias so that either deletes the pod.
        self._pods: dict[str, tuple[str, str, str]] = {}  # PodSpec uid -> (namespace, name, Kubernetes uid)
        self._alias: dict[str, str] = {}  # Kubernetes uid -> PodSpec uid
        self._carried = (0, 0)  # (kubelet generation, registrations seen in driver pods this session replaced)
        self._image = pods.pause_image(self.cluster, self.node)
        self._namespaces: set[str] = set()
        self._driver_stopped = False  # stop_driver() took the DaemonSet off the worker
        self._clean_node()
        if self.driver not in self.snapshot().drivers:
            self.start_driver()

    # ---- the node ----
    def _read(self) -> NodeRead:
        return read_node(self.node, f"{cci_manifests.NAMESPACE}_{self._ds_name()}-*", self.plan.registration_socket)

    def _ds_name(self) -> str:
        return cci_manifests.daemonset(self.plan)["metadata"]["name"]

    def _ours(self) -> list[dict]:
        """The pods created through this backend on the worker (system pods and the driver are not the ledger's)."""
        out = self.cluster.kubectl("get", "pods", "-A", "-l", LABEL, "--field-selector", f"spec.nodeName={self.node}",
                                   "-o", "json")
        return json.loads(out)["items"]

    def _clean_node(self) -> None:
        """A new session starts on an empty ledger: whatever an earlier session left is deleted and released."""
        for pod in self._ours():
            meta = pod["metadata"]
            self.cluster.kubectl("delete", "pod", meta["name"], "-n", meta["namespace"], "--ignore-not-found",
                                 "--wait=true", f"--timeout={POD_TIMEOUT_S}s", timeout=POD_TIMEOUT_S + 10)
        self.cluster.kubectl("delete", "resourceclaims", "-A", "-l", LABEL, "--ignore-not-found", "--wait=true",
                             timeout=POD_TIMEOUT_S)
        wait_for(lambda: not (r := self._read()).cpu.entries and not r.cci["containers"] and not r.cci["pending"],
                 RELEASE_TIMEOUT_S, interval=1.0, what=f"{self.node} to hold no grant before a new session")

    def _namespace(self, name: str) -> None:
        if name in self._namespaces:
            return
        manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        self.cluster.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
        self._namespaces.add(name)

    # ---- acting ----
    def create_pod(self, pod: PodSpec) -> AdmissionResult:
        name = _k8s_name(pod.name)
        for claim in pod.claims:
            if claim.driver and claim.driver != self.driver:
                raise NotImplementedError(f"claim {claim.name} names driver {claim.driver}; the kind backend "
                                          f"deploys one driver ({self.driver})")
        self._namespace(pod.namespace)
        sums_before = self._admission_sums() if pod.claims else None
        objects = [*claim_objects(pod, name, self.driver), pod_object(pod, name, self.node, self._image)]
        self.cluster.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                    "items": objects}))
        status = wait_for(lambda: settled(self.cluster, pod.namespace, name), POD_TIMEOUT_S, interval=0.5,
                          what=f"pod {pod.namespace}/{name} running or refused by the kubelet")
        real = status["metadata"]["uid"]
        self._pods[pod.uid] = (pod.namespace, name, real)
        self._alias[real] = pod.uid
        if status["status"].get("phase") == "Failed":
            # A refusal holds nothing on the node (the embedded node keeps no refused pod either): remove the object.
            reason = status["status"].get("reason", "") or "Failed"
            message = status["status"].get("message", "")
            node_s, driver_s = self._admission_seconds(sums_before)
            self.delete_pod(pod.uid)
            return AdmissionResult(False, reason, message, node_seconds=node_s, driver_seconds=driver_s)
        node_s, driver_s = self._admission_seconds(sums_before)
        read = self._read()
        return AdmissionResult(True, containers=assignments(status, read), node_seconds=node_s,
                               driver_seconds=driver_s)

    def _admission_sums(self) -> tuple[float, float]:
        """The sums of the kubelet's CCI histograms (kubelet-cci metrics.go): whole CCI admissions, CCIAdmit calls."""
        text = cci_deploy.kubelet_metrics(self.cluster, self.node)
        return (sum(cci_deploy.metric_samples(text, "kubelet_cci_admission_duration_seconds_sum").values()),
                sum(cci_deploy.metric_samples(text, "kubelet_cci_admit_duration_seconds_sum").values()))

    def _admission_seconds(self, before: tuple[float, float] | None) -> tuple[float, float]:
        """(node, driver) seconds of the one admission since ``before`` (this session admits one pod at a time).
        A pod without claims has no CCI admission: no driver time, and the node's own time is not measured (NaN,
        which fails any budget rather than passing it)."""
        if before is None:
            return float("nan"), 0.0
        after = self._admission_sums()
        return after[0] - before[0], after[1] - before[1]

    def delete_pod(self, pod_uid: str) -> None:
        """Delete the pod and its claims; return once the kubelet released what it held (both checkpoints).
        ``pod_uid`` is the Kubernetes uid or the PodSpec's; a pod already deleted (or never made) is a no-op."""
        spec_uid = pod_uid if pod_uid in self._pods else self._alias.get(pod_uid, "")
        if spec_uid not in self._pods:
            return
        namespace, name, real = self._pods[spec_uid]
        self.cluster.kubectl("delete", "pod", name, "-n", namespace, "--ignore-not-found", "--wait=true",
                             f"--timeout={POD_TIMEOUT_S}s", timeout=POD_TIMEOUT_S + 10)
        self.cluster.kubectl("delete", "resourceclaims", "-n", namespace, "-l", f"{LABEL}={name}",
                             "--ignore-not-found", timeout=60)

        def released():
            r = self._read()
            return (real not in r.cpu.entries and all(c["podUID"] != real for c in r.cci["containers"])
                    and all(e["podUID"] != real for e in r.cci["pending"]))
        wait_for(released, RELEASE_TIMEOUT_S, interval=0.5, what=f"the kubelet to release pod {namespace}/{name}")
        del self._pods[spec_uid]

    def stop_container(self, pod_uid: str, container: str) -> None:
        raise NotImplementedError("kind backend, first cut: stopping one container (crictl stop, then the kubelet's "
                                  "PostStop) is not wired yet")

    def remove_container_behind_node(self, pod_uid: str, container: str) -> None:
        raise NotImplementedError("kind backend, first cut: removing a container through crictl while the kubelet "
                                  "is down is not wired yet")

    # ---- restarts ----
    def restart_node(self, hard: bool = True) -> None:
        """kill -9 the kubelet (hard; systemd starts it again) or ``systemctl restart kubelet``; back when it
        answers, its node's ResourceSlice is published again and the driver registered again."""
        before = self._read()
        node_exec(self.node, f"kill -9 {before.kubelet_pid}" if hard else "systemctl restart kubelet")
        wait_for(lambda: self._read().kubelet_since > before.kubelet_since and self._read().kubelet_pid,
                 KUBELET_TIMEOUT_S, interval=0.5, what="systemd to start the kubelet again")
        wait_for(lambda: self.cluster.kubectl("get", "--raw", f"/api/v1/nodes/{self.node}/proxy/healthz") == "ok",
                 KUBELET_TIMEOUT_S, interval=1.0, what="the restarted kubelet to answer /healthz")
        # A starting kubelet deletes its node's ResourceSlices (DRA manager start-up); the harness publishes for
        # the CCI driver, which talks to no API server (cci_deploy.republish_slice).
        wait_for(lambda: not cci_deploy.slice_exists(self.cluster, self.plan), 60, interval=0.5,
                 what="the restarted kubelet to wipe its node's ResourceSlices")
        cci_deploy.republish_slice(self.cluster, self.plan, self.run.slots)
        if self._driver_stopped:
            return  # no driver to register: start_driver() waits for it
        wait_for(lambda: self.driver in self.snapshot().drivers, self.manifest.startup_timeout_s + 30, interval=0.5,
                 what=f"the restarted kubelet to register {self.driver} again")

    def _driver_pid(self) -> int:
        out = node_exec(self.node, "crictl ps -q --name '^driver$' --label io.kubernetes.pod.namespace="
                        f"{cci_manifests.NAMESPACE} | head -n 1 | xargs -r crictl inspect -o go-template "
                        "--template '{{.info.pid}}'").strip()
        return int(out) if out.isdigit() else 0

    def _driver_pod(self) -> str:
        return cci_deploy.driver_pod(self.cluster, self.plan)

    def _registrations(self, read: NodeRead | None = None) -> int:
        read = read or self._read()
        events = node_view.registration_events(read.driver_log, read.kubelet_since, cci_deploy.REGISTERED,
                                               cci_deploy.REFUSED)
        seen = sum(1 for e in events if e is None)
        generation, carried = self._carried
        return seen + (carried if generation == read.generation else 0)

    def _replace_driver_pod(self, hard: bool) -> None:
        read = self._read()
        count, pod = self._registrations(read), self._driver_pod()
        if hard and (pid := self._driver_pid()):
            node_exec(self.node, f"kill -9 {pid}")  # no SIGTERM: the sockets stay, as after a crash
        if pod:
            self._carried = (read.generation, count)  # its log goes with the pod
            grace = ("--grace-period=0", "--force") if hard else ()
            self.cluster.kubectl("delete", "pod", pod, "-n", cci_manifests.NAMESPACE, *grace, "--wait=true",
                                 timeout=60)

    def restart_driver(self, hard: bool = True) -> None:
        """A new driver pod (the DaemonSet's), after SIGKILL (hard) or SIGTERM; waits for its registration."""
        before = self._registrations()
        self._replace_driver_pod(hard)
        self._wait_registered(before)

    def stop_driver(self, hard: bool = True) -> None:
        """The DaemonSet selects no node, so its pod goes and no new one comes (SIGKILL first when hard)."""
        self._select_worker(False)
        self._driver_stopped = True
        self._replace_driver_pod(hard)
        if not hard:  # SIGTERM removes the registration socket (spec S1.9): the kubelet deregisters it
            wait_for(lambda: self.driver not in self.snapshot().drivers, 60, interval=0.5,
                     what=f"the kubelet to deregister {self.driver}")

    def start_driver(self) -> None:
        before = self._registrations()
        self._select_worker(True)
        self._driver_stopped = False
        self._wait_registered(before)

    def _select_worker(self, on: bool) -> None:
        value = self.node if on else "cci-conformance-driver-stopped"
        patch = {"spec": {"template": {"spec": {"nodeSelector": {"kubernetes.io/hostname": value}}}}}
        self.cluster.kubectl("patch", "daemonset", self._ds_name(), "-n", cci_manifests.NAMESPACE, "--type=merge",
                             "-p", json.dumps(patch))

    def _wait_registered(self, above: int) -> None:
        wait_for(lambda: self._registrations() > above and self.driver in self.snapshot().drivers,
                 self.manifest.startup_timeout_s + 60, interval=0.5,
                 what=f"the kubelet to register {self.driver} again (a new pod starts first)")

    # ---- observing ----
    def snapshot(self) -> NodeSnapshot:
        read = self._read()
        events = node_view.registration_events(read.driver_log, read.kubelet_since, cci_deploy.REGISTERED,
                                               cci_deploy.REFUSED)
        refusals = [e for e in events if e is not None]
        # Registered: the kubelet's last answer since its start was "registered" and the socket is still there
        # (a SIGKILLed driver's socket stays, and so does its registration, as on the embedded node).
        registered = read.socket_present and bool(events) and events[-1] is None
        return NodeSnapshot(
            mode=read.cci["mode"], online=read.online, reserved=read.reserved, shared_pool=read.cpu.default_cpuset,
            exclusive=exclusive_map(read), containers=containers_of(self._ours(), read),
            drivers=(self.driver,) if registered else (), node_generation=read.generation, policy=read.cpu.policy_name,
            withheld={f"{c['podUID']}/{c['container']}": parse_cpulist(c["withheld"])
                      for c in read.cci["containers"] if c["withheld"]},
            pending=read.owed(), startup=read.startup,
            refused={self.plan.registration_socket: refusals[-1]} if refusals else {},
            registrations=self._registrations(read))

    def _pod_resources(self, method: str):
        import grpc

        from ..protocol.protos import podresources_v1_pb2 as pr
        from ..protocol.protos import podresources_v1_pb2_grpc as pr_grpc

        pid = subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", self.node], capture_output=True,
                             text=True, check=True, timeout=30).stdout.strip()
        # The node container's kubelet socket, reached through its root (the harness runs as root beside docker).
        sock = f"/proc/{pid}/root/var/lib/kubelet/pod-resources/kubelet.sock"
        with grpc.insecure_channel(f"unix:{sock}") as channel:
            stub = pr_grpc.PodResourcesListerStub(channel)
            if method == "allocatable":
                return stub.GetAllocatableResources(pr.AllocatableResourcesRequest(), timeout=10)
            return stub.List(pr.ListPodResourcesRequest(), timeout=10)

    def allocatable_cpus(self) -> CPUs:
        return frozenset(self._pod_resources("allocatable").cpu_ids)

    def listed_exclusive_cpus(self) -> dict[str, CPUs]:
        reply = self._pod_resources("list")
        return {f"{p.namespace}/{p.name}/{c.name}": frozenset(c.cpu_ids)
                for p in reply.pod_resources for c in p.containers if c.cpu_ids}

    def state_files(self) -> dict[str, bytes]:
        read = self._read()
        return {CPU_STATE_FILE: read.cpu_raw, CCI_STATE_FILE: read.cci_raw}

    def persisted_state(self) -> PersistedState:
        """The kubelet's two checkpoints; the CCI one is whole files (no journal), its content without VOLATILE."""
        read = self._read()
        content = {k: v for k, v in read.cci.items() if k not in VOLATILE}
        return PersistedState(cpu_manager_state=read.cpu_raw, cci_content=canonical(content),
                              pending=read.owed())

    def collect_evidence(self, dest: Path) -> list[Path]:
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        read = self._read()
        texts = {"kubelet.log": node_exec(self.node, "journalctl -u kubelet --no-pager -n 3000"),
                 "driver.log": read.driver_log, CPU_STATE_FILE: read.cpu_raw.decode(),
                 CCI_STATE_FILE: read.cci_raw.decode(), "recorded-cpusets.jsonl": read.recorder,
                 "pods.json": json.dumps(self._ours(), indent=1), "pod-uids.json": json.dumps(self._pods, indent=1)}
        written = []
        for name, text in texts.items():
            (dest / name).write_text(text)
            written.append(dest / name)
        return written

    def close(self) -> None:
        """Delete this session's pods and claims (released by the kubelet); the cluster lives to the run's end."""
        try:
            if self.run.cluster.created:
                self._select_worker(True)
                for uid in list(self._pods):
                    self.delete_pod(uid)
        finally:
            self._pods.clear()


def _k8s_name(name: str) -> str:
    """A DNS-1123 label for a PodSpec name (the suites' names are already; others are folded)."""
    folded = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:63].rstrip("-")
    return folded or "pod"


# effective() is the kubelet's rule for a CCI container's cpuset, used by session_ledger; re-exported for tests.
__all__ = ["KindSession", "effective"]
