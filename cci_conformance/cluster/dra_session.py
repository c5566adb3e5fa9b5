"""The DRA session on a node of an existing cluster: kind's session over kubectl and a privileged helper pod."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from ..certify.outcomes import not_applicable
from ..cpuset import CPUs, parse_cpulist
from ..dra import driver_image
from ..dra.api import FEATURES, DraSessionConfig, KubeletCheckpoints, KubeletMetrics
from ..dra.deployment import DriverDeployment
from ..dra.kind_session import KindDraSession
from ..drivers.manifest import load_manifest
from ..kind.cluster.pods import pause_image
from ..kind.runner import CommandFailed
from . import node_facts, observed
from .helper import NodeHelper
from .kube import RUN_LABEL, SUITE_NAMESPACE, Kube, namespace_object, node_namespace
from .worker import ClusterWorker

CLOSE_TIMEOUT_S = 180


@dataclass(frozen=True)
class ClusterTarget:
    """The run's cluster: its kubeconfig, the kubectl to reach it, and the id every object of the run is labelled
    with."""

    kubeconfig: Path
    run_id: str
    kubectl: str = "kubectl"
    daemonset: str = ""  # NAMESPACE/NAME of the driver the cluster already runs (observed.py), else deployed


def profile_mismatch(node: str, have, reason: str, want) -> str:
    """The untested reason for a test whose kubelet profile the node does not run; "" when it does."""
    if have is None:
        return f"node {node}: {reason}; tests of profile {want.name} are untested (the harness never reconfigures " \
               "a cluster's kubelet)"
    if have.name != want.name:
        return (f"node {node} runs the kubelet's CPU manager policy {have.describe()}; tests of profile {want.name} "
                f"({want.describe()}) need a node configured so (the harness never reconfigures a cluster's kubelet)")
    return ""


def probe_features(worker: ClusterWorker, kube: Kube, node: str) -> dict[str, str]:
    """The session features the node does not allow, each with its reason (empty: every one is offered)."""
    # a stopped kubelet could never be started again: the helper is reached through the kubelet (kubectl exec)
    missing: dict[str, str] = {"kubelet-stop": f"node access goes through the kubelet of {node} (kubectl exec), "
                                               "so the harness could not start it again once stopped"}

    def works(script: str) -> bool:
        try:
            worker.node_exec("sh", "-c", script, timeout=30)
            return True
        except CommandFailed:
            return False
    if not works("pid=$(systemctl show -p MainPID --value kubelet) && [ \"${pid:-0}\" != 0 ]"):
        missing["kubelet-restart"] = f"the kubelet of {node} is not a running systemd unit named kubelet"
    if not works("command -v crictl"):
        missing["container-restart"] = f"no crictl on {node}"
        missing["cpuset-effective"] = f"no crictl on {node} to find a container's cgroup"
    if not works("test -r /var/lib/kubelet/cpu_manager_state"):
        missing["checkpoints"] = f"no readable /var/lib/kubelet/cpu_manager_state on {node}"
    try:
        kube.kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/metrics", timeout=60)
    except CommandFailed as exc:
        missing["metrics"] = f"the API server's node proxy refused the kubelet's metrics ({str(exc)[-200:]})"
    return missing


class ClusterDraSession(KindDraSession):
    """One node of an existing cluster with the driver the harness deployed on it; close() deletes what it made."""

    backend_name = "cluster"

    def __init__(self, kube: Kube, worker: ClusterWorker, config: DraSessionConfig, driver_name: str,
                 missing: dict[str, str]):
        super().__init__(kube, worker, config, driver_name)  # type: ignore[arg-type] - Kube stands for the cluster
        self.kube = kube
        self.features = frozenset(FEATURES) - set(missing)
        self.feature_reasons = dict(missing)  # api.missing_feature adds these to the untested reason

    @classmethod
    def open(cls, config: DraSessionConfig, target: ClusterTarget) -> ClusterDraSession:
        node = config.topology.name  # the run's machines are its nodes (cluster/plugin.py)
        namespace = node_namespace(target.run_id, node)
        kube = Kube(target.kubeconfig, target.kubectl, namespace)
        node_json = kube.get_json("node", node)
        configz = json.loads(kube.kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/configz", timeout=60))
        have, reason = node_facts.node_profile(configz)
        untested = profile_mismatch(node, have, reason, config.profile)
        if untested:
            # as a machine without two NUMA nodes cannot exercise a NUMA test: passed where another node of the
            # run has the profile, untested with this reason where none has (docs/spec.md)
            not_applicable(untested)  # before anything is made on the node
        manifest = load_manifest(config.driver_manifest)
        if target.daemonset:  # the driver the cluster runs already: found and observed, never deployed
            ref = observed.parse_ref(target.daemonset)
            daemonset = kube.get_json("daemonset", ref.name, "-n", ref.namespace)
            deployment = DriverDeployment(observed.image_of(daemonset), node, device_mode=config.device_mode,
                                          driver_name=manifest.dra_driver, reserved_cpus=have.reserved)
            def make(helper):
                return observed.ObservedWorker(kube, node, deployment, helper, target.run_id, ref, daemonset)
            never = observed.observed_reasons(ref)
            def image_facts(worker):
                return {"reference": deployment.image, "origin": "observed daemonset", "daemonset": str(ref),
                        "image_ids": worker.image_ids()}
        else:
            built = driver_image.build(manifest)
            deployment = DriverDeployment(built.reference, node, device_mode=config.device_mode,
                                          program=built.program, driver_name=built.driver_name,
                                          extra_args=built.args, hybrid=bool(config.topology.core_types),
                                          reserved_cpus=have.reserved)
            def make(helper):
                return ClusterWorker(kube, node, deployment, helper, target.run_id)
            never = {}
            def image_facts(worker):  # noqa: ARG001 - the image is the one the run built
                return {"reference": built.reference, "origin": built.origin, "archive_sha256": _digest(built.archive)}
        arch = node_facts.node_summary(node_json)["architecture"] or "amd64"
        kube.kubectl("apply", "-f", "-", stdin=json.dumps(namespace_object(namespace, target.run_id)))
        worker = None
        try:
            worker = make(NodeHelper(kube, node, namespace).start(pause_image(kube, node), target.run_id, arch))
            missing = {**probe_features(worker, kube, node), **never}
            worker.deploy()
        except BaseException:
            _remove(kube, worker, namespace)
            raise
        session = cls(kube, worker, config, deployment.driver_name, missing)
        session.profile = have  # the node's own reserved CPUs, not the suites' example
        session.facts = {"nodes": [{"name": node, **node_facts.node_summary(node_json),
                                    "cpu_manager": have.describe(),
                                    "topology": node_facts.topology_summary(config.topology),
                                    "untested_features": dict(sorted(missing.items()))}],
                         "driver_image": image_facts(worker)}
        return session

    # -- what differs from kind: node access through the kubelet, the node's own machine, its namespace -----
    def restart_kubelet(self, hard: bool = True) -> None:
        old = self._kubelet_pid()
        action = f"kill -9 {int(old)}" if hard else "systemctl restart kubelet"
        # `kubectl exec` streams through this very kubelet: the command that kills it must outlive the exec, so
        # it is detached and runs a second after the exec has returned (systemd then restarts the kubelet)
        self.worker.node_exec("sh", "-c", f"setsid sh -c 'sleep 1; {action}' >/dev/null 2>&1 </dev/null &")
        self._wait_kubelet(old)

    def effective_cpus(self, pod: str, container: str) -> CPUs:
        cid = self.pod(pod, events=False).container(container).container_id
        return parse_cpulist(self.worker.effective_cpus(cid))

    def metrics(self) -> KubeletMetrics:
        base = super().metrics()
        try:  # the node's run queue, not this host's: the kubelet times calls by the node's wall clock
            load = float(self.worker.node_exec("cat", "/proc/loadavg").split()[1])
            per_cpu = round(load / max(1, len(self.topology.cpus)), 2)
        except (CommandFailed, ValueError, IndexError):
            per_cpu = None
        return replace(base, host_load_per_cpu=per_cpu)

    def checkpoints(self) -> KubeletCheckpoints:
        found = super().checkpoints()
        # the suites name their claims in their own namespace; on this node they live in the session's
        prepared = tuple(replace(c, namespace=SUITE_NAMESPACE) if c.namespace == self.kube.namespace else c
                         for c in found.prepared)
        return replace(found, prepared=prepared)

    def close(self) -> None:
        _remove(self.kube, self.worker, self.kube.namespace)


def _remove(kube: Kube, worker: ClusterWorker | None, namespace: str) -> None:
    """The node's namespace (test pods, claims, the helper), then its DaemonSet: never raises. The driver goes
    last: a pod with a claim terminates only once the kubelet had the driver unprepare the claim."""
    try:
        kube.kubectl("delete", "namespace", namespace, "--ignore-not-found", "--wait=true",
                     f"--timeout={CLOSE_TIMEOUT_S}s", timeout=CLOSE_TIMEOUT_S + 15)
    except CommandFailed:
        pass  # the run's sweep deletes it by label
    if worker is not None:
        try:
            worker.remove(timeout=CLOSE_TIMEOUT_S)
        except (CommandFailed, TimeoutError):
            pass


def _digest(path: Path) -> str:
    from ..kind.cci.driver_image import file_digest

    return file_digest(path)


def opener(target: ClusterTarget):
    """The DRA suites' opener (dra/suite.py OPENER) for nodes of ``target``."""
    def open_session(config: DraSessionConfig) -> ClusterDraSession:
        return ClusterDraSession.open(config, target)
    return open_session


__all__ = ["RUN_LABEL", "ClusterDraSession", "ClusterTarget", "opener"]
