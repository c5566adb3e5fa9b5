"""A NodeSession over the run's kind worker: pods and claims through the API server, the ledger from the node."""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Sequence
from pathlib import Path

from ...backends.base import NodeFault
from ...cpuset import CPUs, parse_cpulist
from ...drivers.manifest import load_manifest
from ...node.api import AdmissionResult, NodeSnapshot, PersistedState, PodSpec
from ...node.checkpoint import CCI_STATE_FILE, CPU_STATE_FILE, canonical
from ...node.persisted import VOLATILE
from ...waiting import WaitTimeout, wait_for
from ..cluster import pods
from ..cluster.kube_api import KubeAPIError
from . import manifests as cci_manifests
from . import node_view
from .call_log import CallLog
from .driver_hooks import DriverHooks
from .kubelet_restarts import KubeletRestarts
from .ledger import assignments, containers_of, effective, exclusive_map, held_by, pod_started, released
from .node_view import Ledger, NodeRead, node_exec, read_ledger, read_node
from .pod_objects import LABEL, NODE_LABEL, claim_objects, pod_object, sandbox_stalled
from .run_cluster import RunCluster

POD_TIMEOUT_S = 120  # scheduling (DRA allocation) + admission + sandbox start on a loaded 2-CPU host
RELEASE_TIMEOUT_S = 120  # the kubelet's release after a deletion: container stop, PostStop, Remove
# The kubelet applies a changed shared pool to running containers in its CPU-manager reconcile loop (every
# run_cluster.RECONCILE_PERIOD), not under the admission (docs/spec.md S3.3 "on kind"): after a change the
# session waits this long for every container's runtime cpuset to equal the store's; a kubelet that never
# converges is then shown as it is, to the suites' checks.
CONVERGE_TIMEOUT_S = 15
# The waits on the ledger alone read files (node_view.read_ledger, well under a millisecond): they can look often.
LEDGER_POLL_S = 0.1
# Pods create_pods(overlap=True) creates ahead of the kubelet's admission (one at a time left the kubelet idle while
# a pod's sandbox started); the kubelet admits them one at a time whatever this is.
IN_FLIGHT = 4
TIMEOUT_DROPIN = "/etc/systemd/system/kubelet.service.d/20-cci-rpc-timeout.conf"


class KindSession(KubeletRestarts, DriverHooks):
    """A worker of the run's cluster with its driver DaemonSet (docs/kind.md "Backend kind")."""

    backend_name = "kind"
    pods_from_api_server = True  # the kubelet watches the API server for its pods
    # node-stop: the kubelet unit stopped and started by systemctl; driver-pause: SIGSTOP/SIGCONT of the driver's
    # process in the worker; cci-endpoint: the driver's socket, reached from the host through the worker's root.
    features = frozenset({"node-stop", "driver-pause", "cci-endpoint"})

    def __init__(self, config):
        if config.driver_manifest is None:
            raise NotImplementedError("the kind backend always runs the driver DaemonSet; a node without a CCI "
                                      "driver is not offered (docs/kind.md)")
        self.topology = config.topology
        self.manifest = load_manifest(config.driver_manifest)
        self.run, self.worker = RunCluster.for_session(config.topology, config.node_profile, self.manifest)
        self.cluster, self.node, self.plan = self.run.cluster, self.worker.node, self.worker.deployment
        self.api = self.run.api
        self.driver = self.plan.driver_name
        # The API server gives every pod its own uid, which is the one the kubelet, its checkpoints and this
        # session report; the PodSpec's uid is kept as an alias so that either deletes the pod.
        self._pods: dict[str, tuple[str, str, str]] = {}  # PodSpec uid -> (namespace, name, Kubernetes uid)
        self._alias: dict[str, str] = {}  # Kubernetes uid -> PodSpec uid
        self._image = pods.pause_image(self.cluster, self.node)
        self._namespaces: set[str] = set()
        self._driver_stopped = False  # stop_driver() took the DaemonSet off the worker
        self._paused = 0  # the driver pid pause_driver() stopped
        self._restore_timeout: float | None = None  # the kubelet's RPC deadline before this session changed it
        self._call_log: CallLog | None = None  # the kubelet's per-call record, read on (_calls)
        if self.worker.sessions:
            # Before the node is made clean: a driver the last session damaged (one that hangs once it is full)
            # never answers the Removes the kubelet owes for that session's pods, and the node never came clean
            # (hangs-when-full failed ROBUST-004..006 on kind). A fresh driver answers them: Remove is idempotent
            # (docs/spec.md S1.6).
            self._fresh_driver()
        self._clean_node()
        self.worker.sessions += 1
        wanted = float(config.node_profile.get("rpcTimeoutSeconds", self.worker.rpc_timeout_s))
        if wanted != self.worker.rpc_timeout_s:
            self._restore_timeout = self.worker.rpc_timeout_s
            self._set_rpc_timeout(wanted)
        if self.driver not in self.snapshot().drivers:  # an earlier session stopped it: its DaemonSet is back
            self._select_worker(True)
            wait_for(lambda: self.driver in self.snapshot().drivers, self.manifest.startup_timeout_s + 60,
                     interval=0.5, what=f"the kubelet to register {self.driver} for a new session")

    def _set_rpc_timeout(self, seconds: float) -> None:
        """The patched kubelet reads its CCI deadline from CCI_RPC_TIMEOUT at start (patch 0003): a systemd
        drop-in and a kubelet restart give a session the node profile's rpcTimeoutSeconds."""
        node_exec(self.node, f"mkdir -p {posixpath.dirname(TIMEOUT_DROPIN)} && printf '[Service]\\n"
                             f"Environment=CCI_RPC_TIMEOUT={seconds:g}s\\n' > {TIMEOUT_DROPIN} && "
                             "systemctl daemon-reload")
        self.worker.rpc_timeout_s = seconds
        self.restart_node(hard=False)

    # ---- the node ----
    def _read(self) -> NodeRead:
        return read_node(self.node, self._node_root(), self.plan.registration_socket)

    def _ledger(self) -> Ledger:
        """The checkpoints and the recorder log alone, for the waits that poll them: plain file reads through the
        node container's root (node_view.read_ledger), or the full read where that root is not readable (a
        harness without root)."""
        try:
            return read_ledger(self._node_root())
        except PermissionError:
            return self._read()

    def _readable_ledger(self) -> Ledger:
        """The ledger, read as soon as its files can be (the waits on it retry a read that fails)."""
        return wait_for(self._ledger, RELEASE_TIMEOUT_S, interval=LEDGER_POLL_S, what=f"{self.node}'s ledger")

    def _ds_name(self) -> str:
        return cci_manifests.daemonset_name(self.plan)

    def _ours(self) -> list[dict]:
        """The pods created through this backend on the worker (system pods and the driver are not the ledger's)."""
        # A pod being deleted is no longer the ledger's: delete_pod returns once the kubelet released it, and
        # the API object may linger a while after that.
        return [p for p in self.api.list_pods(LABEL, f"spec.nodeName={self.node}")
                if not p["metadata"].get("deletionTimestamp")]

    def _clean_node(self) -> None:
        """A new session starts on an empty ledger: whatever an earlier session left is deleted and released."""
        before = self._readable_ledger()
        owners = set(before.cpu.entries)
        held = held_by(before, owners)
        self._delete_all()
        # Their CPUs back in the shared pool too (ledger.released: the kubelet writes a release in two steps).
        wait_for(lambda: released(r := self._ledger(), owners, held) and not r.cpu.entries
                 and not r.cci["containers"] and not r.cci["pending"],
                 RELEASE_TIMEOUT_S, interval=LEDGER_POLL_S, what=f"{self.node} to hold no grant before a new session")

    def _fresh_driver(self) -> None:
        """A new session's driver starts with no history, as on the embedded node, where every session starts
        its own driver process with an empty state dir: one test's damage to the driver (a leak, a counter, a
        crash) is never blamed on the next (docs/certification.md, isolation). Its pod goes (hard: a driver that
        ignores SIGTERM costs no grace period), its state dir is emptied, and a new pod registers."""
        self.stop_driver(hard=True)
        state = shlex.quote(self.plan.state_dir)
        node_exec(self.node, f"rm -rf {state} && mkdir -p {state}")
        self.start_driver()

    def _delete_all(self) -> None:
        """Delete every pod and claim of this backend on the worker at once (one request per namespace, not one
        per pod: a latency fill leaves a hundred) and wait until the kubelet released them all."""
        ours = self._ours()
        for pod in ours:
            self.api.delete_pod(pod["metadata"]["namespace"], pod["metadata"]["name"])
        for namespace in {pod["metadata"]["namespace"] for pod in ours} | self._namespaces:
            self.api.delete_claims(namespace, f"{NODE_LABEL}={self.node}")
        uids = {pod["metadata"]["uid"] for pod in ours}

        def released() -> bool:
            r = self._ledger()
            return not (uids & set(r.cpu.entries) or any(c["podUID"] in uids for c in r.cci["containers"])
                        or any(e["podUID"] in uids for e in r.cci["pending"]))
        wait_for(released, RELEASE_TIMEOUT_S, interval=LEDGER_POLL_S,
                 what=f"the kubelet to release {len(uids)} deleted pod(s)")
        self._pods.clear()
        self._alias.clear()

    def _namespace(self, name: str) -> None:
        if name in self._namespaces:
            return
        try:
            self.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        except KubeAPIError as exc:
            if exc.status != 409:  # it exists already
                raise
        self._namespaces.add(name)

    # ---- acting ----
    def create_pod(self, pod: PodSpec, *, settle: bool = True) -> AdmissionResult:
        return self.create_pods([pod], settle=settle)[0]

    def create_pods(self, pods: Sequence[PodSpec], *, settle: bool = True,
                    overlap: bool = False) -> list[AdmissionResult]:
        """create_pod for many pods, the next created once the kubelet admitted the one before (CCIAdmit and every
        CCIAddContainerResource returned: the checkpoint's records carry the container ids) or refused it, while
        the runtime starts the earlier ones. With ``overlap`` up to IN_FLIGHT pods are created ahead: the kubelet
        still admits one at a time (its sync loop; the CCI manager holds one lock over each call), but beside
        several sandboxes starting, which slows a driver's answers on a small host (a laptop machine's loaded
        median went from 5 to 27 ms): fit for a deadline, not for latency samples. Each pod's figures are its own
        calls in the kubelet's per-call record (call_log.py)."""
        ahead = IN_FLIGHT if overlap else 1
        submitted, waiting = [], []
        for pod in pods:
            while len(waiting) >= ahead:
                self._wait_admitted(*waiting.pop(0))
            name = self._submit(pod)
            submitted.append((pod, name))
            if pod.claims:
                waiting.append((pod, name))
        return [self._result(pod, name, self._settled(pod, name), settle) for pod, name in submitted]

    def _submit(self, pod: PodSpec) -> str:
        """Create the pod's claims and the pod; its object name."""
        name = _k8s_name(pod.name)
        for claim in pod.claims:
            if claim.driver and claim.driver != self.driver:
                raise NotImplementedError(f"claim {claim.name} names driver {claim.driver}; the kind backend "
                                          f"deploys one driver ({self.driver})")
        self._namespace(pod.namespace)
        for obj in [*claim_objects(pod, name, self.driver, self.node), pod_object(pod, name, self.node, self._image)]:
            self.api.create(obj)
        return name

    def _wait_admitted(self, pod: PodSpec, name: str) -> None:
        """Until the kubelet recorded every claimed container's Add (the record's containerID; its histograms
        observed both calls before it wrote the checkpoint) or refused the pod."""
        claimed = {c.name for c in pod.containers if c.claim}

        def done() -> bool:
            status = self.api.get_pod(pod.namespace, name) or {}
            if status.get("status", {}).get("phase") == "Failed":
                return True
            uid = status.get("metadata", {}).get("uid")
            added = {c["container"] for c in self._ledger().cci["containers"]
                     if c["podUID"] == uid and c.get("containerID")}
            return bool(uid) and claimed <= added
        self._wait_on_pod(pod, name, done, LEDGER_POLL_S, "admitted and its containers Added by the kubelet")

    def _settled(self, pod: PodSpec, name: str) -> dict:
        """The pod (its API object) once the runtime started every container of it or the kubelet refused it.
        The runtime is asked, through the recorder log, not the API server: the kubelet reports a start there a
        PLEG relist and a status sync later, 0.7 s a pod measured here (docs/measurements/kind.md), while what
        the suites read next (the checkpoints, the runtime's cpusets) is there at the start."""
        def done() -> dict | None:
            obj = self.api.get_pod(pod.namespace, name)
            if obj is None:
                return None
            if obj["status"].get("phase") == "Failed" or pod_started(obj, self._ledger()):
                return obj
            return None
        return self._wait_on_pod(pod, name, done, LEDGER_POLL_S, "running or refused by the kubelet")

    def _wait_on_pod(self, pod: PodSpec, name: str, condition, interval: float, what: str):
        """wait_for on one pod; its timeout is the node's NodeFault where the runtime never started the sandbox."""
        try:
            return wait_for(condition, POD_TIMEOUT_S, interval=interval, what=f"pod {pod.namespace}/{name} {what}")
        except WaitTimeout:
            self._raise_if_runtime_stalled(pod.namespace, name)
            raise

    def _result(self, pod: PodSpec, name: str, status: dict, settle: bool) -> AdmissionResult:
        real = status["metadata"]["uid"]
        self._pods[pod.uid] = (pod.namespace, name, real)
        self._alias[real] = pod.uid
        # A pod without claims has no CCI admission: no driver time, and the node's own time is not measured (NaN,
        # which fails any budget rather than passing it).
        node_s, driver_s = self._calls().seconds(real) if pod.claims else (float("nan"), 0.0)
        if status["status"].get("phase") == "Failed":
            # A refusal holds nothing on the node (the embedded node keeps no refused pod either): remove the object.
            reason = status["status"].get("reason", "") or "Failed"
            message = status["status"].get("message", "")
            self.delete_pod(pod.uid)
            return AdmissionResult(False, reason, message, node_seconds=node_s, driver_seconds=driver_s)
        read = self._converged() if settle else self._ledger()
        return AdmissionResult(True, containers=assignments(status, read), node_seconds=node_s,
                               driver_seconds=driver_s)

    def _raise_if_runtime_stalled(self, namespace: str, name: str) -> None:
        """NodeFault when the kubelet admitted the pod and the runtime never started its sandbox: no CCI call
        takes part in that step, so the wait's timeout is the node's failure, not the driver's (docs/spec.md 4.2)."""
        if not sandbox_stalled(self.api.get_pod(namespace, name)):
            return
        events = [f"{e.get('reason', '')}: {' '.join(str(e.get('message', '')).split())[:160]}"
                  for e in self.api.pod_events(namespace, name)[-3:]]
        raise NodeFault(f"the kubelet admitted pod {namespace}/{name}, but the container runtime had not started "
                        f"its sandbox after {POD_TIMEOUT_S}s (the CCI driver takes no part in that step)"
                        + (f"; events: {'; '.join(events)}" if events else ""))

    def _converged(self) -> Ledger:
        """The worker once every container of this backend runs on the cpuset the kubelet's store gives it (its
        reconcile loop applies a changed shared pool later than the admission; CONVERGE_TIMEOUT_S), or as it is
        then: a kubelet that does not converge is for the suites' checks to show, not for this wait to hide."""
        last: list[Ledger] = []

        def settled() -> bool:
            read = self._ledger()
            last[:] = [read]
            return all(c.runtime_cpus == c.store_cpus for c in containers_of(self._ours(), read))
        try:
            wait_for(settled, CONVERGE_TIMEOUT_S, interval=0.1, what="the kubelet's reconcile loop to converge")
        except TimeoutError:
            pass
        return last[0]

    def _calls(self) -> CallLog:
        if self._call_log is None:
            self._call_log = CallLog(self._node_root())
        return self._call_log

    def delete_pod(self, pod_uid: str) -> None:
        """Delete the pod and its claims; return once the kubelet released what it held (both checkpoints).
        ``pod_uid`` is the Kubernetes uid or the PodSpec's; a pod already deleted (or never made) is a no-op."""
        self.delete_pods([pod_uid])

    def delete_pods(self, pod_uids: Sequence[str]) -> None:
        """delete_pod for several pods: every deletion asked at once (the kubelet stops pods side by side), then
        one wait for all the releases and the Removes owed for them, and one for the reconcile loop."""
        targets = []
        for uid in pod_uids:
            spec_uid = uid if uid in self._pods else self._alias.get(uid, "")
            if spec_uid in self._pods and spec_uid not in (t[0] for t in targets):
                targets.append((spec_uid, *self._pods[spec_uid]))
        if not targets:
            return
        reals = {real for *_, real in targets}
        held = held_by(self._readable_ledger(), reals)
        # No wait for the API objects to go: what the contract promises is the kubelet's release, awaited below.
        for _, namespace, name, _ in targets:
            self.api.delete_pod(namespace, name)
            self.api.delete_claims(namespace, f"{LABEL}={name}")
        names = ", ".join(f"{namespace}/{name}" for _, namespace, name, _ in targets)

        def delivered():
            return all(e["podUID"] not in reals for e in self._ledger().cci["pending"])
        wait_for(lambda: released(self._ledger(), reals, held), RELEASE_TIMEOUT_S, interval=LEDGER_POLL_S,
                 what=f"the kubelet to release pod {names}")
        # The Removes the kubelet owes the driver for them follow the release. Awaited for one RPC deadline and a
        # margin, not required: a paused or dead driver keeps them owed (snapshot.pending shows it, and the
        # suites that care check it), as the embedded node's delete_pod returns with them owed.
        try:
            wait_for(delivered, self.worker.rpc_timeout_s + 2, interval=LEDGER_POLL_S,
                     what=f"the kubelet to deliver the Removes owed for {names}")
        except TimeoutError:
            pass
        for spec_uid, *_ in targets:
            del self._pods[spec_uid]
        self._converged()

    def stop_container(self, pod_uid: str, container: str) -> None:
        raise NotImplementedError("kind backend: stopping one container (crictl stop, then the kubelet's PostStop) "
                                  "is not wired; no suite uses it")

    def remove_container_behind_node(self, pod_uid: str, container: str) -> None:
        """While the kubelet is down (stopped hard here if it runs), the runtime loses the container and the pod
        is deleted from the API server: at its next start the kubelet finds a record whose container is gone
        (restore.go), releases it and owes the driver its Remove. The pod object goes too, because a real
        kubelet would otherwise start a new container for a pod it still has to run."""
        spec_uid = pod_uid if pod_uid in self._pods else self._alias.get(pod_uid, "")
        namespace, name, real = self._pods[spec_uid]
        if self._read().kubelet_pid:
            self.stop_node(hard=True)
        node_exec(self.node, f"crictl ps -a -q --label io.kubernetes.pod.uid={real} --name '^{container}$' "
                             "| xargs -r crictl rm -f")
        self.api.delete_pod(namespace, name, grace_seconds=0)  # the kubelet is down: the object goes at once

    # ---- observing ----
    def snapshot(self) -> NodeSnapshot:
        read = self._read()
        events = node_view.kubelet_registrations(read.registry, read.kubelet_since, self.driver)
        refusals = [e for e in events if e is not None]
        # Registered: the kubelet's last answer since its start was "registered" and the socket is still there
        # (a SIGKILLed driver's socket stays, and so does its registration, as on the embedded node).
        registered = read.socket_present and bool(events) and events[-1] is None
        return NodeSnapshot(
            mode=read.cci["mode"], online=read.online, reserved=read.reserved, shared_pool=read.shared_pool(),
            exclusive=exclusive_map(read), containers=containers_of(self._ours(), read),
            drivers=(self.driver,) if registered else (), node_generation=read.generation, policy=read.cpu.policy_name,
            withheld={f"{c['podUID']}/{c['container']}": parse_cpulist(c["withheld"])
                      for c in read.cci["containers"] if c["withheld"]},
            pending=read.owed(), startup=read.startup,
            refused={self.plan.registration_socket: refusals[-1]} if refusals else {},
            registrations=sum(1 for e in events if e is None))

    def _pod_resources(self, method: str):
        import grpc

        from ...protocol.protos import podresources_v1_pb2 as pr
        from ...protocol.protos import podresources_v1_pb2_grpc as pr_grpc

        # The node container's kubelet socket, reached through its root (the harness runs as root beside docker).
        sock = f"{self._node_root()}/var/lib/kubelet/pod-resources/kubelet.sock"
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
        read = self._ledger()
        return {CPU_STATE_FILE: read.cpu_raw, CCI_STATE_FILE: read.cci_raw}

    def persisted_state(self) -> PersistedState:
        """The kubelet's two checkpoints; the CCI one is whole files (no journal), its content without VOLATILE."""
        read = self._ledger()
        content = {k: v for k, v in read.cci.items() if k not in VOLATILE}
        return PersistedState(cpu_manager_state=read.cpu_raw, cci_content=canonical(content),
                              pending=read.owed())

    def collect_evidence(self, dest: Path) -> list[Path]:
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        read = self._read()
        texts = {"kubelet.log": node_exec(self.node, "journalctl -u kubelet --no-pager -n 3000"),
                 "driver.log": node_exec(self.node, f"cat /var/log/pods/{cci_manifests.NAMESPACE}_{self._ds_name()}-*/"
                                                    "driver/*.log 2>/dev/null || true"),
                 CPU_STATE_FILE: read.cpu_raw.decode(),
                 CCI_STATE_FILE: read.cci_raw.decode(), "recorded-cpusets.jsonl": read.recorder,
                 "pods.json": json.dumps(self._ours(), indent=1), "pod-uids.json": json.dumps(self._pods, indent=1)}
        written = []
        for name, text in texts.items():
            (dest / name).write_text(text)
            written.append(dest / name)
        return written

    def close(self) -> None:
        """Delete this session's pods and claims (released by the kubelet), give the kubelet back the RPC deadline
        it had; the cluster lives to the run's end."""
        try:
            if self.run.cluster.created:
                self.resume_driver()
                self._select_worker(True)
                self._driver_stopped = False
                if not self._read().kubelet_pid:
                    self.start_node()
                self._delete_all()
                if self._restore_timeout is not None:
                    self._set_rpc_timeout(self._restore_timeout)
        finally:
            self._pods.clear()


def _k8s_name(name: str) -> str:
    """A DNS-1123 label for a PodSpec name (the suites' names are already; others are folded)."""
    folded = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:63].rstrip("-")
    return folded or "pod"


# effective() is the kubelet's rule for a CCI container's cpuset, used by session_ledger; re-exported for tests.
__all__ = ["KindSession", "effective"]
