"""The embedded backend: the node and the driver as local processes over a rendered topology in one workdir."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import weakref
from collections.abc import Sequence
from pathlib import Path

import grpc
import yaml

from ..cpuset import CPUs
from ..drivers.manifest import load_manifest
from ..drivers.process import DriverProcess
from ..errors import ConfigError
from ..node.api import AdmissionResult, NodeSnapshot, PersistedState, PodSpec
from ..node.checkpoint import CCI_JOURNAL_FILE, CCI_STATE_FILE, CPU_STATE_FILE
from ..node.client import FAST_RECONNECT, NodeClient
from ..node.forkserver import ForkServerError, fork_server
from ..node.persisted import persisted_state
from ..node.profile import parse_config
from ..node.runtime import CPUSET_FILE, container_dir
from ..node.watcher import registered_endpoint
from ..paths import PROJECT_ROOT
from ..procgroup import exit_status, group_stopped, running, stop_group, with_parent_death
from ..protocol.protos import podresources_v1_pb2 as pr
from ..protocol.protos import podresources_v1_pb2_grpc as pr_grpc
from ..topology.model import Topology
from ..topology.render import render
from ..topology.scratch import scratch_parent
from ..waiting import WaitTimeout, wait_for
from .base import FEATURES, SessionConfig

MAX_SOCKET_PATH = 107
NODE_START_TIMEOUT_S = 20.0
NODE_STOP_GRACE_S = 10.0  # SIGTERM to SIGKILL
RPC_TIMEOUT_S = 10.0
DRIVER_PAUSE_TIMEOUT_S = 10.0  # SIGSTOP to every thread stopped (microseconds when idle)


_RENDERED: dict[Topology, Path] = {}


def _render_cached(topology: Topology, machine: Path) -> None:
    """Render each topology once per process and link it into the workdir: rendering a big machine writes
    thousands of files, and node and driver only read them. The cache goes away at interpreter exit."""
    cached = _RENDERED.get(topology)
    if cached is None or not cached.is_dir():
        # The tree holds no socket, so it may live on a memory filesystem, where the 1024-CPU machine
        # renders in about 0.4 s instead of about 3 s on disk (docs/topology.md, benchmarks/bench_topology.py).
        cached = Path(tempfile.mkdtemp(prefix="cci-machine-", dir=scratch_parent()))
        atexit.register(shutil.rmtree, cached, True)
        render(topology, cached)
        _RENDERED[topology] = cached
    machine.symlink_to(cached, target_is_directory=True)


class NodeProcessError(RuntimeError):
    """The node process exited or did not become ready; the message carries its log tail."""


def _finalize(procs: list[subprocess.Popen], workdir: Path, owned: bool) -> None:
    for proc in procs:
        stop_group(proc)
    if owned:
        shutil.rmtree(workdir, ignore_errors=True)


class EmbeddedSession:
    """One node process (+ one driver) under ``workdir`` (layout: docs/architecture.md)."""

    backend_name = "embedded"
    pods_from_api_server = False  # the harness is its only source of pods
    features = frozenset(FEATURES)  # local processes: every hook of the contract

    def __init__(self, config: SessionConfig):
        self.topology: Topology = config.topology
        self.workdir = Path(config.workdir)
        self._owned = not self.workdir.exists() or not any(self.workdir.iterdir())
        self.machine = self.workdir / "machine"
        self.kubelet = self.workdir / "kubelet"
        self.runtime = self.workdir / "runtime"
        self.logs = self.workdir / "logs"
        self.env = dict(config.env)
        self._node: subprocess.Popen | None = None
        self._procs: list[subprocess.Popen] = []
        self._finalizer = weakref.finalize(self, _finalize, self._procs, self.workdir, self._owned)
        self.manifest = load_manifest(config.driver_manifest) if config.driver_manifest else None
        sock = self.kubelet / "plugins" / (self.manifest.name if self.manifest else "x") / "cci.sock"
        if len(str(sock)) > MAX_SOCKET_PATH - 10:
            raise ConfigError(f"workdir {self.workdir} is too long for unix sockets ({sock})", field="workdir",
                              fix='use tempfile.mkdtemp(prefix="cci-", dir="/tmp")')
        for d in (self.kubelet, self.runtime, self.logs, self.workdir / "driver-state"):
            d.mkdir(parents=True, exist_ok=True)
        _render_cached(self.topology, self.machine)
        profile = dict(config.node_profile)
        profile.update(kubeletRoot=str(self.kubelet), sysfsRoot=str(self.machine / "sys"),
                       runtimeRoot=str(self.runtime))
        parse_config(profile, "node profile", need_paths=True)  # fail here, with the field, not in the child
        self.node_config = self.workdir / "node-config.json"  # JSON: the node starts without the YAML parser
        self.node_config.write_text(json.dumps(profile, sort_keys=True, indent=1))
        self.client = NodeClient(self.kubelet / "node-control.sock", timeout=RPC_TIMEOUT_S)
        self._pr_channel: grpc.Channel | None = None
        self.driver: DriverProcess | None = None
        if self.manifest:
            self.driver = DriverProcess(self.manifest, registry_dir=self.kubelet / "plugins_registry",
                                        plugin_dir=self.kubelet / "plugins" / self.manifest.name,
                                        sysfs_root=self.machine / "sys", state_dir=self.workdir / "driver-state",
                                        log_path=self.logs / "driver.log", extra_env=self.env)
        try:
            self._start_node()
            if self.driver:
                self.start_driver()
        except BaseException:
            self.close()
            raise

    # ---- processes ----
    def _start_node(self, generation_above: int = -1) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
        env.update(self.env)
        args = ["--config", str(self.node_config)]
        # Forked from a process that imported the node already, where it can (node/forkserver.py: a fifth of a
        # run's CPU went to those imports); else a new interpreter. Either way a SIGKILLed harness runs no cleanup,
        # and the kernel kills its node then (procgroup.with_parent_death).
        server = fork_server(env, str(PROJECT_ROOT))
        try:
            self._node = server and server.spawn(args, str(PROJECT_ROOT), env, str(self.logs / "node.log"))
        except ForkServerError:  # it went away (it is started again next time): this node starts the slow way
            self._node = None
        if self._node is None:
            argv, preexec = with_parent_death([sys.executable, "-m", "cci_conformance.node", *args])
            with open(self.logs / "node.log", "ab") as log:
                self._node = subprocess.Popen(argv, cwd=PROJECT_ROOT, stdin=subprocess.DEVNULL, stdout=log,
                                              stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                              preexec_fn=preexec)
        self._procs.append(self._node)
        try:
            self.wait_node_ready(generation_above)
        except BaseException:
            self._stop_node(hard=True)  # reaped and forgotten: never signal a recycled pid later
            raise

    def wait_node_ready(self, generation_above: int = -1) -> None:
        node = self._node
        exited = object()

        def ready():
            if not running(node):
                return exited  # truthy: stop waiting at once (wait_for would retry an exception)
            try:
                return self.client.wait_ready(0.2, generation_above)
            except Exception:
                return None

        try:
            outcome = wait_for(ready, NODE_START_TIMEOUT_S, interval=0.02, what="node control API")
        except Exception as exc:
            raise NodeProcessError(f"{exc}\n{self.node_log_tail()}") from None
        if outcome is exited:
            raise NodeProcessError(f"node exited with code {exit_status(node)}:\n{self.node_log_tail()}")

    def node_log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join((self.logs / "node.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    @property
    def node_pid(self) -> int | None:
        return self._node.pid if running(self._node) else None

    def _stop_node(self, hard: bool) -> int | None:
        node = self._node
        if node is None:
            return None
        code = stop_group(node, grace_s=0 if hard else NODE_STOP_GRACE_S)
        self._procs.remove(node)
        self._node = None
        return code

    def stop_node(self, hard: bool = True) -> int | None:
        """Stop the node (SIGKILL when hard) and leave it down; returns its exit code."""
        return self._stop_node(hard)

    def start_node(self) -> None:
        """Start the node again from the files it left; waits until it answers (and the driver re-registered)."""
        self._start_node()
        self._wait_driver_registered()

    def restart_node(self, hard: bool = True) -> None:
        self._stop_node(hard)
        self.start_node()

    def _wait_driver_registered(self, registrations_above: int = 0) -> None:
        """Wait for a registration newer than ``registrations_above`` (a SIGKILLed driver's name lingers)."""
        if self.driver is None or not self.driver.alive:
            return
        name = self.driver.driver_name

        def done():
            reply = self.client.ping(timeout=1.0)
            return name in reply.drivers and reply.registrations > registrations_above
        try:
            wait_for(done, self.manifest.startup_timeout_s, interval=0.02, what=f"node to register driver {name}")
        except WaitTimeout as exc:
            reasons = self._refusals(name)
            if not reasons:
                raise
            # The node's plugin watcher refused the registration (DESIGN §2.3): say why, not just "timed out".
            raise WaitTimeout(f"node refused driver {name}: {'; '.join(reasons)} ({exc})") from None

    def _refusals(self, name: str) -> list[str]:
        """The node's reasons for refusing ``name``'s registration socket (any refusal if none is its own)."""
        try:
            refused = dict(self.client.snapshot().refused)
        except Exception:  # the node may be down: the timeout itself is then the best report
            return []
        own = [reason for sock, reason in refused.items() if Path(sock).name == f"{name}-reg.sock"]
        return own or [f"{reason} (socket {sock})" for sock, reason in refused.items()]

    def restart_driver(self, hard: bool = True) -> None:
        self.stop_driver(hard)
        self.start_driver()

    def stop_driver(self, hard: bool = True) -> None:
        if self.driver is None:
            return
        if hard:
            self.driver.kill()
        else:
            self.driver.terminate()
        if running(self._node):
            name = self.driver.driver_name
            # a SIGKILLed driver leaves its sockets; the node drops it only when the socket goes away
            if not hard:
                wait_for(lambda: name not in self.client.ping(timeout=1.0).drivers, 10.0, interval=0.02,
                         what=f"node to deregister driver {name}")

    def start_driver(self) -> None:
        if self.driver is None:
            raise ConfigError("this session has no driver", field="driver_manifest", fix="open it with a manifest")
        node_up = running(self._node)
        before = self.client.ping(timeout=RPC_TIMEOUT_S).registrations if node_up else 0
        self.driver.start()
        self.driver.wait_registered()
        if node_up:
            self._wait_driver_registered(before)

    # ---- acting ----
    def create_pod(self, pod: PodSpec, *, settle: bool = True) -> AdmissionResult:  # noqa: ARG002 - settled
        return self.client.create_pod(pod)

    def create_pods(self, pods: Sequence[PodSpec], *, settle: bool = True,  # noqa: ARG002
                    overlap: bool = False) -> list[AdmissionResult]:  # noqa: ARG002
        return [self.client.create_pod(pod) for pod in pods]  # the node admits and runs a pod in one call

    def delete_pod(self, pod_uid: str) -> None:
        self.client.delete_pod(pod_uid)

    def delete_pods(self, pod_uids: Sequence[str]) -> None:
        for uid in pod_uids:
            self.client.delete_pod(uid)

    def stop_container(self, pod_uid: str, container: str) -> None:
        self.client.stop_container(pod_uid, container)

    def remove_container_behind_node(self, pod_uid: str, container: str) -> None:
        """The runtime drops a container while the node is down (stops the node first if it runs, hard)."""
        if self._node is not None:
            self._stop_node(hard=True)
        shutil.rmtree(container_dir(self.runtime, pod_uid, container), ignore_errors=True)

    # ---- observing ----
    def snapshot(self) -> NodeSnapshot:
        return self.client.snapshot()

    def _pod_resources(self) -> pr_grpc.PodResourcesListerStub:
        """One channel for the session (ACCT-010 reads pod-resources twice a step: a channel each cost 1 ms more
        than the call); it reconnects within 20 ms to a restarted node's new socket, and calls wait for that."""
        if self._pr_channel is None:
            self._pr_channel = grpc.insecure_channel(f"unix:{self.kubelet / 'pod-resources' / 'kubelet.sock'}",
                                                     options=FAST_RECONNECT)
        return pr_grpc.PodResourcesListerStub(self._pr_channel)

    def allocatable_cpus(self) -> CPUs:
        reply = self._pod_resources().GetAllocatableResources(pr.AllocatableResourcesRequest(),
                                                              timeout=RPC_TIMEOUT_S, wait_for_ready=True)
        return frozenset(reply.cpu_ids)

    def listed_exclusive_cpus(self) -> dict[str, CPUs]:
        reply = self._pod_resources().List(pr.ListPodResourcesRequest(), timeout=RPC_TIMEOUT_S, wait_for_ready=True)
        return {f"{p.namespace}/{p.name}/{c.name}": frozenset(c.cpu_ids)
                for p in reply.pod_resources for c in p.containers if c.cpu_ids}

    def persisted_state(self) -> PersistedState:
        return persisted_state(self.state_files())

    def state_files(self) -> dict[str, bytes]:
        """The checkpoint files as on disk (this backend's own view, for the evidence bundle and the node's
        tests; suites read :meth:`persisted_state`)."""
        out = {}
        for name in (CPU_STATE_FILE, CCI_STATE_FILE, CCI_JOURNAL_FILE):
            path = self.kubelet / name
            if path.exists():
                out[name] = path.read_bytes()
        return out

    # ---- the contract's feature hooks (backends/base.py FEATURES) ----
    def cci_endpoint(self) -> Path:
        """The CCI socket the driver advertised (docs/spec.md S1.2), for protocol-level checks such as a retried
        CCIAdmit and for REG-002: the endpoint of the node's last accepted registration of it (its log,
        node/watcher.py), not the folder this session gave the driver."""
        if self.driver is None:
            raise ConfigError("this session has no driver", field="driver_manifest", fix="open it with a manifest")
        try:
            text = (self.logs / "node.log").read_text(errors="replace")
        except FileNotFoundError:
            text = ""
        endpoint = registered_endpoint(text, self.driver.driver_name)
        if endpoint is None:
            raise LookupError(f"the node accepted no registration of {self.driver.driver_name}: "
                              "no endpoint was advertised to it")
        return Path(endpoint)

    def pause_driver(self) -> None:
        """SIGSTOP the driver: its calls hang until :meth:`resume_driver` (a driver busy answering)."""
        if self.driver is not None and self.driver.alive:
            self.driver.signal(signal.SIGSTOP)
            # kill(2) only queues the signal: wait until every thread stopped, or the next call may be answered
            wait_for(lambda: group_stopped(self.driver.pid) or not self.driver.alive, DRIVER_PAUSE_TIMEOUT_S,
                     interval=0.005, what=f"driver {self.driver.driver_name} to stop on SIGSTOP")

    def resume_driver(self) -> None:
        if self.driver is not None:
            self.driver.signal(signal.SIGCONT)

    def runtime_cpusets(self) -> dict[str, str]:
        """"<pod_uid>/<container>" -> the cpuset.cpus text the runtime holds."""
        base = self.runtime / "kubepods"
        return {f"{f.parent.parent.name[3:]}/{f.parent.name}": f.read_text().strip()
                for f in sorted(base.glob(f"pod*/*/{CPUSET_FILE}"))}

    def collect_evidence(self, dest: Path) -> list[Path]:
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        written = []
        for name in ("node.log", "driver.log"):
            src = self.logs / name
            if src.exists():
                written.append(Path(shutil.copy(src, dest / name)))
        for name, data in self.state_files().items():
            (dest / name).write_bytes(data)
            written.append(dest / name)
        (dest / "runtime-cpusets.yaml").write_text(yaml.safe_dump(self.runtime_cpusets(), sort_keys=True))
        written.append(dest / "runtime-cpusets.yaml")
        if running(self._node):
            from ..node.codec import snapshot_to_json
            try:
                (dest / "snapshot.json").write_text(snapshot_to_json(self.snapshot()))
                written.append(dest / "snapshot.json")
            except grpc.RpcError:
                pass
        return written

    def close(self) -> None:
        try:
            self.client.close()
            if self._pr_channel is not None:
                self._pr_channel.close()
        except Exception:
            pass
        if self.driver is not None:
            self.resume_driver()  # a stopped process would sit out SIGTERM's grace period
            self.driver.close()
        if self._node is not None:
            self._stop_node(hard=False)
        self._finalizer()


class EmbeddedBackend:
    name = "embedded"

    def prepare(self, groups) -> None:
        """Nothing to build ahead: each session starts its own node."""

    def run_facts(self) -> dict:
        return {}

    def finish(self) -> None:
        """Nothing outlives the sessions."""

    def open(self, config: SessionConfig) -> EmbeddedSession:
        return EmbeddedSession(config)
