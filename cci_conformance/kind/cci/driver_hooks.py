"""The driver hooks of a kind worker's session: its driver pod replaced, stopped, started, paused; its endpoint."""

from __future__ import annotations

import posixpath
import subprocess
from pathlib import Path

from ...procgroup import STOPPED, thread_states
from ...waiting import wait_for
from . import manifests as cci_manifests
from . import node_view
from .node_view import NodeRead, node_exec


class DriverHooks:
    """The driver hooks of KindSession (the NodeSession contract's restart_driver, stop_driver, start_driver,
    pause_driver, resume_driver, cci_endpoint), kept apart from its pods and its kubelet. They use the session's
    worker (``node``, ``plan``, ``api``, ``driver``, ``manifest``), its reads (``_read``, ``snapshot``,
    ``_ds_name``) and set ``_driver_stopped``."""

    def _driver_pid(self) -> int:
        """The driver's process id in the worker (0 when it has no running container)."""
        out = node_exec(self.node, "crictl ps -q --name '^driver$' --label io.kubernetes.pod.namespace="
                        f"{cci_manifests.NAMESPACE} | head -n 1 | xargs -r "
                        "crictl inspect -o go-template --template '{{.info.pid}}'").strip()
        return int(out) if out.isdigit() else 0

    def _driver_pod(self, deleting: bool = False) -> dict | None:
        """The driver's running pod on this worker (None while there is none); with ``deleting``, also one whose
        deletion has begun (its processes may still answer)."""
        selector = f"cci-driver={self.plan.driver_name},cci-node={self.plan.node_name}"
        running = [p for p in self.api.list_pods(selector) if p["metadata"]["namespace"] == cci_manifests.NAMESPACE
                   and p["status"].get("phase") == "Running"
                   and (deleting or not p["metadata"].get("deletionTimestamp"))]
        running.sort(key=lambda p: bool(p["metadata"].get("deletionTimestamp")))  # a live one first
        return running[0] if running else None

    def _registrations(self, read: NodeRead | None = None) -> int:
        """Registrations of the driver the kubelet accepted since it started (its journal, kubelet-cci registry.go)."""
        read = read or self._read()
        events = node_view.kubelet_registrations(read.registry, read.kubelet_since, self.driver)
        return sum(1 for e in events if e is None)

    def _replace_driver_pod(self, hard: bool) -> None:
        """The driver's pod goes (the DaemonSet makes a new one unless it selects no node), and with it every
        process of that pod. Hard: as a crash, without SIGTERM, so the sockets stay. The process is stopped
        (SIGSTOP) first and the pod's deletion ends it (its SIGTERM waits undelivered behind the stop, then
        SIGKILL): a process killed at once is restarted by the kubelet inside the old pod before the deletion
        lands, and that restarted driver registers, then removes the sockets of the pod replacing it when the
        deletion stops it (seen on kind as registered, deregistered, registered: an admission in the gap was
        refused with DriverNotRegistered)."""
        # A pod already being deleted counts: once stop_driver pointed the DaemonSet away, its controller deletes
        # the pod itself, gracefully, and a driver not awaited here still answered the next admission (a ROBUST-004
        # false fail on kind: the claim pod was admitted, then its Add found the driver gone).
        found = self._driver_pod(deleting=True)
        if found is None:
            return
        pod, uid = found["metadata"]["name"], found["metadata"]["uid"]
        pid = self._driver_pid() if hard else 0
        if pid:
            node_exec(self.node, f"kill -STOP {pid} 2>/dev/null || true")  # a driver that died meanwhile is fine
        # Hard: no grace period, the object goes at once (kubectl delete --grace-period=0 --force); soft: the pod's
        # own grace period. Either way the object is awaited gone (kubectl's --wait), the DaemonSet's next pod is
        # another object with another name.
        self.api.delete_pod(cci_manifests.NAMESPACE, pod, grace_seconds=0 if hard else None)
        wait_for(lambda: (p := self.api.get_pod(cci_manifests.NAMESPACE, pod)) is None or p["metadata"]["uid"] != uid,
                 60, interval=0.2, what=f"driver pod {pod} to be deleted")
        if pid and not self._read().kubelet_pid:  # no kubelet to end it, nor to restart it: kill it here
            node_exec(self.node, f"kill -9 {pid} 2>/dev/null || true")
        wait_for(lambda: not node_exec(self.node, f"crictl ps -q --label io.kubernetes.pod.uid={uid}").strip(),
                 60, interval=0.5, what=f"the processes of driver pod {pod} to end")

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

    def pause_driver(self) -> None:
        """SIGSTOP the driver's process: its calls hang until :meth:`resume_driver` (a driver busy answering)."""
        pid = self._driver_pid()
        if pid:
            node_exec(self.node, f"kill -STOP {pid}")
            # kill(2) only queues the signal: wait until every thread stopped, or the next call may be answered
            wait_for(lambda: self._stopped(pid), 10.0, interval=0.05, what=f"driver process {pid} to stop on SIGSTOP")
        self._paused = pid

    def _stopped(self, pid: int) -> bool:
        out = node_exec(self.node, f"cat /proc/{pid}/task/*/stat 2>/dev/null || true")
        states = thread_states(out)
        return not states or states <= STOPPED  # none: it exited meanwhile, nothing left to answer

    def resume_driver(self) -> None:
        pid = getattr(self, "_paused", 0)
        self._paused = 0
        if pid:
            node_exec(self.node, f"kill -CONT {pid} 2>/dev/null || true")  # it may have been killed meanwhile

    def cci_endpoint(self) -> Path:
        """The CCI socket the driver advertised (docs/spec.md S1.2): the endpoint of the kubelet's last accepted
        registration of it (its journal, kubelet-cci registry.go), not the deployment plan's folder, so REG-002
        judges what the driver said. Reached from the host through the worker container's root (the harness runs
        as root beside docker, as for the pod-resources socket)."""
        read = self._read()
        endpoint = node_view.kubelet_endpoint(read.registry, read.kubelet_since, self.driver)
        if endpoint is None:
            raise LookupError(f"the kubelet of {self.node} accepted no registration of {self.driver} since it "
                              f"started: no endpoint was advertised to it")
        return Path(f"{self._node_root()}{posixpath.normpath(endpoint)}")

    def _node_root(self) -> Path:
        """The node container's root as the host sees it (``/proc/<pid>/root``); its pid is asked of docker once per
        session (a kind node is never restarted within a run)."""
        root = getattr(self, "_root", None)
        if root is None:
            pid = subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", self.node], capture_output=True,
                                 text=True, check=True, timeout=30).stdout.strip()
            root = self._root = Path(f"/proc/{pid}/root")
        return root

    def _select_worker(self, on: bool) -> None:
        value = self.node if on else "cci-conformance-driver-stopped"
        patch = {"spec": {"template": {"spec": {"nodeSelector": {"kubernetes.io/hostname": value}}}}}
        self.api.patch_daemonset(cci_manifests.NAMESPACE, self._ds_name(), patch)

    def _wait_registered(self, above: int) -> None:
        # one snapshot per look: its registrations are _registrations()'s count, read once with the drivers
        wait_for(lambda: (snap := self.snapshot()).registrations > above and self.driver in snap.drivers,
                 self.manifest.startup_timeout_s + 60, interval=0.2,
                 what=f"the kubelet to register {self.driver} again (a new pod starts first)")
