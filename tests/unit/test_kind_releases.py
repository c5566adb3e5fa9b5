"""Unit tests of the releases the node image is built for: pins, components, kubeadm API and cgroup v1 settings."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from cci_conformance.errors import ConfigError
from cci_conformance.kind.cluster.config import ClusterPlan, NodePlan, kind_config
from cci_conformance.kind.image import components, nodeimage, versions
from cci_conformance.node.profile import parse_config
from cci_conformance.topology import library


@pytest.fixture
def workdir():
    path = Path(tempfile.mkdtemp(prefix="cci-test-release-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_release_lookup_accepts_both_spellings_and_names_the_known_ones():
    assert versions.release("v1.37.2") is versions.VANILLA
    assert versions.release("1.34.12") is versions.CCI
    with pytest.raises(ConfigError) as err:
        versions.release("v1.36.0")
    assert "--kubernetes" in str(err.value) and "v1.34.12, v1.36.3, v1.37.2" in str(err.value)


def test_vanilla_release_builds_its_own_kubelet_and_tools_of_its_release():
    vanilla = components.for_release(versions.VANILLA)
    assert not versions.VANILLA.cci_kubelet and versions.CCI.cci_kubelet
    assert vanilla.kubernetes.version == "v1.37.2"
    assert vanilla.kubernetes.local_replace_version == "v0.37.2"
    assert "-X k8s.io/component-base/version.gitMinor=37" in vanilla.kubernetes.ldflags
    assert "kubelet" in vanilla.kubernetes.binaries
    assert (vanilla.kind.version, vanilla.etcd.version, vanilla.coredns.version) == ("v0.33.0", "v3.7.0", "v1.14.6")
    assert nodeimage.default_image(versions.VANILLA) == "cci-conformance/kind-node:v1.37.2"


def test_cci_release_components_are_unchanged_so_its_cached_builds_stay_valid():
    # The cache key of a component is its repr: the CCI image must not rebuild because releases exist.
    assert components.KUBERNETES == components.for_release(versions.CCI).kubernetes
    assert components.KUBERNETES.version == versions.KUBERNETES == "v1.34.12"
    assert components.KUBERNETES.local_replace_version == versions.KUBERNETES_STAGING == "v0.34.12"
    assert [c.name for c in components.ALL] == ["kubernetes", "kind", "containerd", "crictl", "etcd", "coredns"]
    assert nodeimage.default_image() == "cci-conformance/kind-node:v1.34.12"


def _static_worker_plan(release: versions.Release) -> ClusterPlan:
    profile = parse_config({"mode": "coexistence", "cpuManagerPolicy": "static", "reservedSystemCPUs": "0",
                            "cci": False})
    return ClusterPlan("cci-r", "img:1", [NodePlan("control-plane"),
                                          NodePlan("worker", library.load("laptop-1s4c-smt2"), profile)],
                       release=release)


def test_v1beta4_node_patch_lists_kubelet_flags_as_name_value_pairs(workdir):
    config = kind_config(_static_worker_plan(versions.VANILLA), workdir)
    (patch,) = [yaml.safe_load(p) for p in config["nodes"][1]["kubeadmConfigPatches"]]
    assert patch["apiVersion"] == "kubeadm.k8s.io/v1beta4"
    assert patch["nodeRegistration"]["kubeletExtraArgs"] == [
        {"name": "cpu-manager-policy", "value": "static"}, {"name": "reserved-cpus", "value": "0"}]


def test_v1beta3_node_patch_keeps_the_map(workdir):
    config = kind_config(_static_worker_plan(versions.CCI), workdir)
    (patch,) = [yaml.safe_load(p) for p in config["nodes"][1]["kubeadmConfigPatches"]]
    assert patch["apiVersion"] == "kubeadm.k8s.io/v1beta3"
    assert patch["nodeRegistration"]["kubeletExtraArgs"] == {"cpu-manager-policy": "static", "reserved-cpus": "0"}


def test_a_kubelet_that_refuses_cgroup_v1_is_told_not_to(workdir):
    vanilla = yaml.safe_load(kind_config(_static_worker_plan(versions.VANILLA), workdir)["kubeadmConfigPatches"][0])
    cci = yaml.safe_load(kind_config(_static_worker_plan(versions.CCI), workdir)["kubeadmConfigPatches"][0])
    assert vanilla["failCgroupV1"] is False and vanilla["protectKernelDefaults"] is True
    assert "failCgroupV1" not in cci


def test_vanilla_image_label_is_never_stale_against_the_checkout():
    assert nodeimage.stale_patch({"kubelet_patch": nodeimage.VANILLA_PATCH, "kubernetes": "v1.37.2", "id": "x"}) == ""
    assert nodeimage.stale_patch({"kubelet_patch": "sha256:old", "kubernetes": "v1.34.12", "id": "x"}) != ""
