"""`cci-conformance run --backend cluster`: check the options and the nodes, read each node's machine before the
suites start, and delete whatever carries the run's label when they end."""

from __future__ import annotations

import json
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ..kind.cluster.pods import pause_image
from ..kind.runner import CommandFailed
from . import node_facts, observed
from .backend import CCI_REFUSED
from .helper import HelperRefused, NodeHelper
from .kube import Kube, namespace_object, node_namespace

NODES_DIR = "nodes"  # in the report directory: each node's sysfs as read, DIR/<node>/{sys,proc}


def check_options(kubeconfig: str | None, nodes: list[str] | None, workers: int | None,
                  topologies: list[str] | None, kubernetes: str | None, daemonset: str | None = None) -> None:
    """ConfigError naming the option when the cluster options do not fit together."""
    if not kubeconfig:
        raise ConfigError("--backend cluster needs the cluster's kubeconfig", field="--kubeconfig",
                          fix="pass --kubeconfig FILE")
    if not Path(kubeconfig).is_file():
        raise ConfigError("kubeconfig not found", file=kubeconfig, field="--kubeconfig", fix="pass an existing file")
    if not nodes:
        raise ConfigError("--backend cluster certifies named nodes", field="--node",
                          fix="name each node: --node NAME [--node NAME ...] (kubectl get nodes lists them)")
    if len(set(nodes)) != len(nodes):
        raise ConfigError("a node is named twice", field="--node", fix="name each node once")
    if topologies:
        raise ConfigError("on --backend cluster the machine is the node's own, read from its sysfs",
                          field="--topology", fix="leave --topology out")
    if kubernetes:
        raise ConfigError("on --backend cluster the Kubernetes release is the cluster's", field="--kubernetes",
                          fix="leave --kubernetes out")
    if daemonset:
        observed.parse_ref(daemonset)
    if workers is not None and workers > len(nodes):
        raise ConfigError(f"-n {workers} is more workers than the {len(nodes)} nodes named", field="-n",
                          fix=f"use -n {len(nodes)} (one worker per node), or fewer")


@dataclass
class ClusterRun:
    kube: Kube
    run_id: str
    nodes: tuple[str, ...]
    nodes_dir: Path
    api_server: str
    daemonset: str = ""  # the driver the cluster runs already, observed (observed.py)

    def pytest_args(self) -> list[str]:
        return ["-p", "cci_conformance.cluster.plugin", "--cluster-kubeconfig", str(self.kube.kubeconfig),
                "--cluster-run-id", self.run_id, "--cluster-nodes-dir", str(self.nodes_dir),
                "--cluster-kubernetes", self.api_server,
                *(["--cluster-driver-daemonset", self.daemonset] if self.daemonset else [])]

    def workers(self, asked: int | None) -> int:
        """One node per pytest-xdist worker unless -n says otherwise (0: one process, the nodes in turn)."""
        if asked is not None:
            return asked
        return len(self.nodes) if len(self.nodes) > 1 else 0

    def finish(self) -> list[str]:
        """Delete what the run left (an interrupted session's objects); the objects still there, if any."""
        problems = self.kube.sweep(self.run_id)
        try:
            left = self.kube.leftovers(self.run_id)
        except CommandFailed as exc:
            left = [f"(could not list: {exc})"]
        return problems + [f"left behind: {name}" for name in left]


def prepare(kubeconfig: str, nodes: list[str], dra: bool, report_dir: Path, daemonset: str | None = None,
            device_mode: str | None = None) -> ClusterRun:
    """Check the cluster and its nodes and read each node's machine; ConfigError says what to fix."""
    kube = Kube(Path(kubeconfig).resolve())
    try:
        version = json.loads(kube.kubectl("version", "-o", "json", timeout=60)).get("serverVersion", {})
    except (CommandFailed, ValueError) as exc:
        raise ConfigError(f"the cluster does not answer: {exc}", field="--kubeconfig",
                          fix="check the kubeconfig with kubectl get nodes") from None
    found = {n["metadata"]["name"]: n for n in kube.get_json("nodes")["items"]}
    unknown = [n for n in nodes if n not in found]
    if unknown:
        raise ConfigError(f"no node {', '.join(unknown)} in the cluster", field="--node",
                          fix=f"name one of: {', '.join(sorted(found))}")
    if not dra:
        kubelets = ", ".join(f"{n} ({node_facts.node_summary(found[n])['kubelet_version']})" for n in nodes)
        raise ConfigError(f"{CCI_REFUSED}; nodes: {kubelets}", field="--backend",
                          fix="--backend kind for a CCI driver")
    if daemonset:  # before anything is made: the driver must run on every named node already
        observed.check(kube, observed.parse_ref(daemonset), nodes, device_mode)
    run_id = uuid.uuid4().hex[:8]
    nodes_dir = report_dir / NODES_DIR
    shutil.rmtree(nodes_dir, ignore_errors=True)
    for node in nodes:
        read_node(kube, node, found[node], run_id, nodes_dir / node)
    return ClusterRun(kube, run_id, tuple(nodes), nodes_dir, version.get("gitVersion", ""), daemonset or "")


def read_node(kube: Kube, node: str, node_json: dict, run_id: str, root: Path) -> None:
    """The node's sysfs through a helper pod into ``root``; the helper's namespace is deleted afterwards."""
    namespace = node_namespace(f"{run_id}-read", node)
    arch = node_facts.node_summary(node_json)["architecture"] or "amd64"
    try:
        kube.kubectl("apply", "-f", "-", stdin=json.dumps(namespace_object(namespace, run_id)))
        helper = NodeHelper(kube, node, namespace).start(pause_image(kube, node), run_id, arch)
        dump = helper.node_exec("sh", "-c", node_facts.DUMP_SCRIPT, timeout=120)
    except (HelperRefused, CommandFailed, RuntimeError) as exc:
        raise ConfigError(f"cannot read node {node}'s machine: {exc}", field="--node",
                          fix="let the run create a privileged, hostPID pod on the node (docs/cluster.md)") from None
    finally:
        try:
            kube.kubectl("delete", "namespace", namespace, "--ignore-not-found", "--wait=false", timeout=60)
        except CommandFailed:
            pass  # the run's sweep deletes it by label
    node_facts.write_tree(dump, root)
    (root / "dump.txt").write_text(dump)
    node_facts.read_topology(root, node)  # a dump the reader refuses stops the run here, with its message
