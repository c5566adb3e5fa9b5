"""The pytest plugin of a `--backend cluster` run: the nodes as the run's machines, and the DRA suites' opener."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..certify.settings import register_topology
from ..certify.stash import suite_facts
from ..dra.suite import OPENER
from . import node_facts
from .dra_session import ClusterTarget, opener
from .kube import Kube

TARGET = pytest.StashKey[ClusterTarget]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("cluster", "--backend cluster")
    group.addoption("--cluster-kubeconfig", metavar="FILE", help="kubeconfig of the existing cluster")
    group.addoption("--cluster-run-id", metavar="ID", help="the run's id: the value of its label on every object")
    group.addoption("--cluster-nodes-dir", metavar="DIR",
                    help="each node's sysfs as read by `cci-conformance run` (DIR/<node>/sys): the run's machines")
    group.addoption("--cluster-kubectl", metavar="FILE", default="kubectl", help="kubectl to reach the cluster")
    group.addoption("--cluster-kubernetes", metavar="VERSION", default="",
                    help="the API server's version, recorded in report.json")
    group.addoption("--cluster-driver-daemonset", metavar="NAMESPACE/NAME", default="",
                    help="the driver the cluster already runs as this DaemonSet: observed, never deployed")


def _register_nodes(directory: Path) -> None:
    for root in sorted(p for p in directory.iterdir() if (p / "sys").is_dir()):
        register_topology(root.name, lambda root=root: node_facts.read_topology(root, root.name))


def pytest_cmdline_main(config: pytest.Config) -> None:
    # before any pytest_configure (the run's settings load their machines there), in the controller and in each
    # pytest-xdist worker: the nodes become machines named after them
    nodes_dir = config.getoption("cluster_nodes_dir")
    if nodes_dir:
        _register_nodes(Path(nodes_dir))


@pytest.hookimpl(tryfirst=True)  # before the DRA suites' conftest picks its opener
def pytest_configure(config: pytest.Config) -> None:
    kubeconfig, run_id = config.getoption("cluster_kubeconfig"), config.getoption("cluster_run_id")
    if not kubeconfig or not run_id:
        raise pytest.UsageError("--backend cluster needs --cluster-kubeconfig and --cluster-run-id; fix: run it "
                                "through `cci-conformance run --backend cluster --kubeconfig FILE --node NAME`")
    target = ClusterTarget(Path(kubeconfig), run_id, config.getoption("cluster_kubectl"),
                           config.getoption("cluster_driver_daemonset"))
    config.stash[TARGET] = target
    config.stash[OPENER] = opener(target)


def pytest_sessionstart(session: pytest.Session) -> None:
    version = session.config.getoption("cluster_kubernetes")
    if version:  # the cluster's release, not the DRA suites' default kind image (dra/suite.py Sessions)
        facts = suite_facts(session.config)
        facts["kubernetes"] = facts["api_server"] = version


def pytest_unconfigure(config: pytest.Config) -> None:
    target = config.stash.get(TARGET, None)
    if target is not None and not hasattr(config, "workerinput"):  # once every worker closed its nodes
        Kube(target.kubeconfig, target.kubectl).sweep(target.run_id)
