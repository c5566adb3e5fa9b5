"""The one kind cluster of a run: one faked worker per machine the run asks for, the driver as a DaemonSet."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ...backends.base import NodeFault, NodeStartFailed
from ...cpuset import format_cpulist
from ...drivers.manifest import DriverManifest
from ...errors import ConfigError
from ...node.profile import NodeConfig, parse_config
from ...topology.model import Topology
from ...waiting import WaitTimeout
from ..cluster.config import ClusterPlan, NodePlan
from ..cluster.kube_api import KubeAPI
from ..cluster.lifecycle import KindCluster, delete_orphans, owned_name
from ..runner import CommandFailed, say
from . import driver_image
from .deploy import RegistrationRefused
from .manifests import CCIDriverDeployment

# Cluster names: <prefix>-<pid>; CCI_KIND_PREFIX lets runs side by side on one host keep apart.
DEFAULT_PREFIX = "cci-run"
# The kubelet's CPU-manager reconcile loop runs every 10 s by default; the backend waits for it to converge after
# every change (session.py), so a shorter period makes runs faster without changing what is checked. 200 ms was
# tried (2026-12-07): the two-machine run on 2 cores took as long (27.4 min), its time is the kubelets' pod starts.
RECONCILE_PERIOD = "1s"
# The kubelet's maxPods is 110, so 128 admission slots (the most one ResourceSlice holds) never run out first.
SLOTS = 128


@dataclass(frozen=True)
class RunKey:
    """What the cluster was made for: a later session asking for something else cannot share it."""

    mode: str  # coexistence or alpha: the kubelet's CPU manager policy
    reserved: frozenset[int]
    options: tuple[tuple[str, bool], ...]
    driver: Path  # the manifest


@dataclass
class Worker:
    """One kind worker: its machine, its driver DaemonSet, and the RPC deadline its kubelet runs with now."""

    topology: Topology
    node: str
    deployment: CCIDriverDeployment
    machine: Path  # the rendered sysfs tree on the host
    rpc_timeout_s: float
    slots: int = SLOTS
    sessions: int = 0  # sessions opened on this worker so far: each after the first starts a driver afresh


INOTIFY_INSTANCES = Path("/proc/sys/fs/inotify/max_user_instances")
INSTANCES_PER_NODE = 64  # systemd and the kubelet of one kind node; the kernel's default of 128 fits about two


def inotify_problem(nodes: int) -> str:
    """Why this host cannot start ``nodes`` kind nodes ("" when it can): each runs systemd, which needs inotify
    instances, and a node without them never boots (kind's known issue "too many open files")."""
    try:
        have = int(INOTIFY_INSTANCES.read_text())
    except (OSError, ValueError):
        return ""
    need = INSTANCES_PER_NODE * (nodes + 1)
    return "" if have >= need else f"fs.inotify.max_user_instances is {have}, {nodes} kind nodes need about {need}"


# What the patched kubelet implements (kubelet-cci/README.md "Modes"): its CCI hooks on the static policy's store
# (coexistence) or on their own store beside the none policy (alpha, KEP-3675 l.109-111).
KUBELET_MODES = {("coexistence", "static"), ("alpha", "none")}


def node_config(profile: dict) -> NodeConfig:
    """The node profile, which must be what the patched kubelet implements: coexistence or alpha, CCI on."""
    config = parse_config(profile, "node profile")
    if (config.mode, config.policy) not in KUBELET_MODES or not config.cci:
        raise ConfigError(f"node profile mode {config.mode!r} with policy {config.policy!r} and cci {config.cci}: "
                          "the kind backend runs the CCI-patched kubelet in coexistence (static policy) or alpha "
                          "(none policy) mode, CCI on (docs/kind.md \"Backend kind\")",
                          field="mode", fix="use --cci-node-profile coexistence or alpha on the kind backend")
    return config


def kubelet_flags(config: NodeConfig) -> dict[str, str]:
    """The run's extra kubelet flags: a short reconcile period; under the none policy (alpha) the reserved CPUs,
    which cluster.config.kubelet_args passes with the static policy only and which alpha's availableCpus leaves
    out (docs/spec.md S3.2)."""
    flags = {"cpu-manager-reconcile-period": RECONCILE_PERIOD}
    if config.policy == "none" and config.reserved:
        flags["reserved-cpus"] = format_cpulist(config.reserved)
    return flags


def distributed() -> bool:
    """Whether this process is one pytest-xdist worker of several: each makes clusters for its own machines."""
    return bool(os.environ.get("PYTEST_XDIST_WORKER"))


class RunCluster:
    """Control plane + one worker per machine it was made for; the driver deployed on each; deleted at exit.

    One process makes one cluster with every machine the run planned. A pytest-xdist worker of a run spread over
    machines (``run -n``, the suites' tests grouped by machine: certify/machine_scheduling.py) makes one when it
    first opens a session on a machine: that machine and the machines its tests open beside it (LAT-004's
    growth machines), so two processes never share a kubelet and each boots only what it uses.
    """

    _clusters: list[RunCluster] = []
    _groups: tuple[tuple[Topology, ...], ...] = ()
    _failed: dict[frozenset[str], BaseException] = {}
    _lock = threading.Lock()
    facts: dict = {}  # what the run ran on (report.json run.backend_facts), kept after the clusters are gone

    @classmethod
    def plan(cls, groups) -> None:
        """The machines the run will ask for, as groups: a run topology, then the machines its tests open beside
        it (LAT-004's growth machines). Each gets its worker when its cluster is made, since kind cannot add
        nodes to a running cluster."""
        cls._groups = tuple(tuple(group) for group in groups if group)

    @classmethod
    def _machines_for(cls, topology: Topology) -> tuple[Topology, ...]:
        """The machines of the cluster a session on ``topology`` makes when no cluster of this process has it."""
        seen: dict[str, Topology] = {}
        groups = cls._groups
        if distributed():  # only the groups this machine leads; the others are for the process running them
            groups = tuple(g for g in groups if g[0].name == topology.name)
        for group in ((topology,), *groups):
            for t in group:
                if not any(t.name in c.workers for c in cls._clusters):
                    seen.setdefault(t.name, t)
        return tuple(seen.values())

    def __init__(self, key: RunKey, config: NodeConfig, manifest: DriverManifest, topologies: tuple[Topology, ...]):
        from ..cluster import toolchain
        from ..image import nodeimage
        from . import run_driver

        image = nodeimage.default_image()
        if not nodeimage.image_exists(image):
            raise ConfigError(f"the kind node image {image} is not built", field="--backend",
                              fix="build it once with `cci-conformance kind build-node-image`")
        problem = toolchain.docker_problem() or inotify_problem(len(topologies) + 1)
        facts = nodeimage.image_facts(image)
        stale = nodeimage.stale_patch(facts)
        if stale:  # a certificate must not name a kubelet patch the node does not run
            raise ConfigError(f"the kind node image {image} is stale: {stale}", field="--backend",
                              fix="rebuild it with `cci-conformance kind build-node-image` (the kubelet step only)")
        if problem:
            raise ConfigError(f"the kind backend cannot run here: {problem}", field="--backend",
                              fix="set docker up with tools/docker-setup/setup.sh (it also raises the inotify limits: "
                                  "sysctl -w fs.inotify.max_user_instances=512), or run on the embedded backend")
        self.key = key
        self.manifest = manifest
        # <prefix>-<pid>, <prefix>-<n>-<pid> for a process's later clusters (a pytest-xdist worker's second
        # machine group): the pid stays last, which is how cluster.delete_orphans finds a dead run's clusters
        prefix = os.environ.get("CCI_KIND_PREFIX", DEFAULT_PREFIX)
        name = owned_name(prefix, str(len(RunCluster._clusters) + 1) if RunCluster._clusters else "")
        nodes = [NodePlan("worker", t, config, kubelet_flags=kubelet_flags(config))
                 for t in topologies]
        plan = ClusterPlan(name, image, [NodePlan("control-plane"), *nodes])
        self.cluster = KindCluster(plan, kind=toolchain.kind_binary(), kubectl=toolchain.kubectl_binary())
        self.timings: dict[str, float] = {}
        atexit.register(self.delete)
        # SIGTERM (CI or `timeout` stopping the run) must delete the cluster like Ctrl-C does: as an interrupt,
        # so pytest ends and atexit runs (the default action would end the process without either).
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _interrupt)
        for orphan in delete_orphans(toolchain.kind_binary()):  # a SIGKILLed run could not delete its own
            say(f"kind backend: deleted {orphan}, left by a run that no longer exists")
        started = time.monotonic()
        try:
            try:  # no driver takes part in these two: a failure is the node's (docs/spec.md 4.2, NodeFault)
                self.cluster.create()
                self.cluster.wait_ready()
            except (CommandFailed, TimeoutError) as exc:
                raise NodeFault(f"the kind cluster {name} did not start: {exc}") from exc
            self.timings["cluster"] = time.monotonic() - started
            self.api = KubeAPI(self.cluster.kubeconfig)
            try:
                self.image = driver_image.for_manifest(manifest)
            except CommandFailed as exc:  # the harness's own build from the driver's folder (a vendor archive
                raise NodeFault(f"the harness could not build the image of driver {manifest.name}: {exc}") \
                    from exc  # is only read, and a bad one is a ConfigError naming the manifest)
            self.workers: dict[str, Worker] = {}
            for topology, node in zip(topologies, plan.node_names()[1:], strict=True):
                deployment = CCIDriverDeployment(
                    manifest, self.image.reference, node, manifest.name, command=self.image.command,
                    python=self.image.python, working_dir=self.image.working_dir, env=self.image.env)
                # kind_config rendered each worker's machine under <workdir>/<node name> (cluster.config.kind_config)
                machine = self.cluster.workdir / node
                try:
                    self.timings[f"driver {node}"] = run_driver.deploy(self.cluster, deployment, self.image.archive,
                                                                       SLOTS, machine)
                except (WaitTimeout, RegistrationRefused) as exc:  # the driver's own start: REG-001's, not the node's
                    raise NodeStartFailed(f"driver {manifest.name} (manifest {manifest.path}) did not register with "
                                          f"the kubelet of machine {topology.name}: {exc}", driver_at_fault=True) \
                        from exc
                self.workers[topology.name] = Worker(topology, node, deployment, machine, config.rpc_timeout_s)
        except BaseException:
            self.delete()
            raise
        self._record_facts(image, facts)
        say(f"kind backend: cluster {name} with {len(topologies)} worker(s) ready in {self.timings['cluster']:.1f} s; "
            f"driver {manifest.name} ({self.image.origin}) registered on each")

    @classmethod
    def for_session(cls, topology: Topology, profile: dict, manifest: DriverManifest) -> tuple[RunCluster, Worker]:
        config = node_config(profile)
        key = RunKey(config.mode, config.reserved, tuple(sorted(config.options.items())), manifest.path)
        with cls._lock:
            for current in cls._clusters:
                if current.cluster.created and topology.name in current.workers:
                    if current.key != key:
                        raise NotImplementedError(
                            "the kind backend runs one cluster per run for one driver, mode, reserved set and "
                            f"policy options; this session asks for driver {manifest.name} in mode {config.mode} "
                            f"with {profile.get('reservedSystemCPUs')!r} reserved (docs/kind.md \"Backend kind\")")
                    return current, current.workers[topology.name]
            machines = cls._machines_for(topology)
            names = frozenset(t.name for t in machines)
            if names in cls._failed:  # a cluster that could not start does not get a second try per test
                raise cls._failed[names]
            try:
                made = cls(key, config, manifest, machines)
            except NodeStartFailed as exc:
                cls._failed[names] = exc
                raise
            except Exception as exc:  # every later session would fail alike: the run stops (certify/early_stop.py)
                failure = NodeStartFailed(f"the kind cluster of machine(s) {', '.join(sorted(names))} did not come up: "
                                          f"{exc}", driver_at_fault=False)
                cls._failed[names] = failure
                raise failure from exc
            cls._clusters.append(made)
            return made, made.workers[topology.name]

    def _record_facts(self, image: str, facts: dict) -> None:
        """report.json run.backend_facts: the node image, every cluster of this process and its workers."""
        merged = RunCluster.facts
        merged.update({"node_image": image, **{f"node_image_{k}" if k == "id" else k: v for k, v in facts.items()},
                       "driver_image": {"reference": self.image.reference, "origin": self.image.origin,
                                        "archive_sha256": self.image.digest}})
        merged["clusters"] = [*merged.get("clusters", []), self.cluster.plan.name]
        merged["workers"] = {**merged.get("workers", {}), **{n: w.node for n, w in self.workers.items()}}

    @classmethod
    def delete_all(cls) -> None:
        """Delete every cluster of this process (at its end, before atexit)."""
        for made in list(cls._clusters):
            made.delete()

    def delete(self) -> None:
        """Delete the cluster (nodes, network, scratch files); safe to call twice. Signals are held off meanwhile:
        an interrupt arriving during the deletion (a run stopped just as it ended) left the network behind."""
        if self.cluster.created:
            say(f"kind backend: deleting cluster {self.cluster.plan.name}")
        api = getattr(self, "api", None)  # made once the cluster was ready
        if api is not None:
            api.close()
        with _signals_held():
            self.cluster.delete()
        if self in RunCluster._clusters:
            RunCluster._clusters.remove(self)


def sweep_orphans() -> None:
    """Delete the clusters of harness processes that no longer run (cluster.delete_orphans); best effort, and
    nothing at all on a host without docker or the kind binary."""
    from ..cluster import toolchain

    if toolchain.docker_problem():
        return
    # never a build at exit: without a built kind binary no cluster of ours runs. Asked of the cache's stamp, not
    # through cache.cached_only(): a context variable of a module that pytester's in-process runs import afresh
    # is not the one the older gobuild module reads, and every failing fake run built kind (30-60 s each)
    kind = toolchain.built_kind_binary()
    if kind is None:
        return
    with _signals_held():
        for orphan in delete_orphans(kind):
            say(f"kind backend: deleted {orphan}, left by a process that no longer runs")


@contextlib.contextmanager
def _signals_held():
    """SIGINT and SIGTERM wait until the block ends (main thread only: signals are delivered there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)


def _interrupt(signum, frame):  # noqa: ARG001 - signal handler signature
    raise KeyboardInterrupt(f"signal {signum}")
