"""Fixtures of the kind e2e: the offline node image and one cluster with two faked workers, always deleted."""

from __future__ import annotations

import os
import subprocess

import pytest
from kind_plans import DRIVER, GO_REFERENCE, INTEL, INTEL_PROFILE, SLOTS, SNC4, SNC4_PROFILE

from cci_conformance.drivers.manifest import load_manifest
from cci_conformance.kind.cci import deploy
from cci_conformance.kind.cci.manifests import CCIDriverDeployment
from cci_conformance.kind.cluster import hostguard, toolchain
from cci_conformance.kind.cluster import lifecycle as kind_cluster_mod
from cci_conformance.kind.cluster.config import ClusterPlan, NodePlan
from cci_conformance.kind.image import cache, go_driver, nodeimage
from cci_conformance.kind.runner import say
from cci_conformance.node.profile import parse_config
from cci_conformance.topology import library


def pytest_collection_modifyitems(config, items):
    # Building the image and booting a cluster takes minutes: run only when asked for (-m kind, tox -e kind).
    if "kind" in (config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(reason="kind e2e runs only when selected with -m kind (tox -e kind)")
    for item in items:
        if item.get_closest_marker("kind"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def node_image():
    problem = toolchain.docker_problem()
    if problem:
        pytest.skip(f"kind e2e: {problem}")
    if not nodeimage.image_exists(nodeimage.default_image()):
        problem = toolchain.build_problem()
        if problem:
            pytest.skip(f"kind e2e: no node image and {problem}")
    with cache.building("the node image"):
        return nodeimage.build_node_image()


@pytest.fixture(scope="session")
def cluster(node_image, tmp_path_factory):
    # CCI_KIND_E2E_PREFIX names the cluster (runs side by side on one host need different prefixes).
    prefix = os.environ.get("CCI_KIND_E2E_PREFIX", "cci-e2e")
    plan = ClusterPlan(f"{prefix}-{os.getpid()}", node_image.image, [
        NodePlan("control-plane"),
        NodePlan("worker", library.load(INTEL), parse_config(INTEL_PROFILE)),
        NodePlan("worker", library.load(SNC4), parse_config(SNC4_PROFILE)),
    ])
    kind = toolchain.kind_binary()
    host_before = hostguard.read_sysctls()
    with kind_cluster_mod.KindCluster(plan, kind=kind, kubectl=toolchain.kubectl_binary(),
                                      logs_dir=tmp_path_factory.mktemp("kind-logs")) as created:
        created.create()
        created.wait_ready()
        _swap_kubelet(created, os.environ.get("CCI_KIND_KUBELET"))
        yield created
    # Teardown checks: nothing of the cluster is left, and the host's kernel settings never changed.
    assert plan.name not in kind_cluster_mod.list_clusters(kind)
    leftovers = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=io.x-k8s.kind.cluster={plan.name}"],
                               capture_output=True, text=True, check=True).stdout.split()
    assert leftovers == [], f"node containers left behind: {leftovers}"
    networks = subprocess.run(["docker", "network", "ls", "-q", "--filter", f"name={plan.name}"],
                              capture_output=True, text=True, check=True).stdout.split()
    assert networks == [], f"docker networks left behind: {networks}"
    assert hostguard.read_sysctls() == host_before


def _swap_kubelet(created, binary: str | None) -> None:
    """Mutation checks (docs/kind.md): CCI_KIND_KUBELET names another kubelet build (e.g. one with a
    deliberately broken kubelet-cci patch) that replaces the image's on every node before any test runs."""
    if not binary:
        return
    for node in created.node_names():
        for argv in (["docker", "exec", node, "systemctl", "stop", "kubelet"],
                     ["docker", "cp", binary, f"{node}:/usr/bin/kubelet"],
                     ["docker", "exec", node, "systemctl", "start", "kubelet"]):
            subprocess.run(argv, check=True, capture_output=True, timeout=120)
    created.wait_ready()


@pytest.fixture(scope="session")
def intel_worker(cluster):
    return cluster.node_names()[1]


@pytest.fixture(scope="session")
def snc4_worker(cluster):
    return cluster.node_names()[2]


@pytest.fixture(scope="module")
def cci_driver(cluster, intel_worker):
    """The Go reference CCI driver deployed on the INTEL worker and registered with its kubelet, per module."""
    built = go_driver.build_image()
    plan = CCIDriverDeployment(load_manifest(GO_REFERENCE), built.reference, intel_worker, DRIVER)
    try:
        seconds = deploy.deploy(cluster, plan, built.archive, SLOTS)
        say(f"cci: driver image {built.seconds:.1f} s (reused: {built.reused}); registered {seconds:.1f} s after apply")
        yield plan
    finally:
        # Deregistered before the next module: the static differential runs with no CCI driver registered.
        deploy.undeploy(cluster, plan)
