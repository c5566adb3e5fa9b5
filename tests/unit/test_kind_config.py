"""Unit tests of the kind cluster config generated from topologies and node profiles."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import yaml

from cci_conformance.errors import ConfigError
from cci_conformance.kind.cluster.config import ClusterPlan, NodePlan, kind_config, kubelet_args
from cci_conformance.node.profile import parse_config
from cci_conformance.topology import library


def _profile(reserved="0", **options):
    data = {"mode": "coexistence", "cpuManagerPolicy": "static", "reservedSystemCPUs": reserved, "cci": False}
    if options:
        data["cpuManagerPolicyOptions"] = {k.replace("_", "-"): v for k, v in options.items()}
    return parse_config(data)


@pytest.fixture
def workdir():
    path = Path(tempfile.mkdtemp(prefix="cci-test-kind-", dir="/tmp"))
    yield path
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def test_config_is_named_and_mounts_each_faked_node(workdir):
    intel = library.load("server-2s8c-smt2-intel")
    plan = ClusterPlan("cci-x", "img:1", [
        NodePlan("control-plane"),
        NodePlan("worker", intel, _profile("0,16")),
        NodePlan("worker"),
    ])
    config = kind_config(plan, workdir)
    assert config["name"] == "cci-x"
    assert [n["image"] for n in config["nodes"]] == ["img:1"] * 3
    faked = config["nodes"][1]
    targets = {m["containerPath"]: Path(m["hostPath"]) for m in faked["extraMounts"]}
    assert set(targets) == {"/sys/devices/system/cpu", "/sys/devices/system/node", "/proc/cpuinfo"}
    assert targets["/sys/devices/system/cpu"].joinpath("cpu31", "topology", "thread_siblings_list").is_file()
    assert (targets["/sys/devices/system/cpu"] / "online").read_text().strip() == "0-31"
    assert "extraMounts" not in config["nodes"][0] and "extraMounts" not in config["nodes"][2]
    assert plan.node_names() == ["cci-x-control-plane", "cci-x-worker", "cci-x-worker2"]


def test_worker_gets_static_policy_through_its_join_configuration(workdir):
    plan = ClusterPlan("cci-y", "img:1", [
        NodePlan("control-plane"),
        NodePlan("worker", library.load("laptop-1s4c-smt2"), _profile("0,4", full_pcpus_only="true")),
    ])
    config = kind_config(plan, workdir)
    (patch,) = [yaml.safe_load(p) for p in config["nodes"][1]["kubeadmConfigPatches"]]
    assert patch["kind"] == "JoinConfiguration"
    assert patch["apiVersion"] == "kubeadm.k8s.io/v1beta3"
    assert patch["nodeRegistration"]["kubeletExtraArgs"] == {
        "cpu-manager-policy": "static", "reserved-cpus": "0,4", "cpu-manager-policy-options": "full-pcpus-only=true"}
    (cluster_patch,) = [yaml.safe_load(p) for p in config["kubeadmConfigPatches"]]
    assert cluster_patch == {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
                             "protectKernelDefaults": True}


def test_control_plane_profile_goes_to_init_configuration(workdir):
    plan = ClusterPlan("cci-z", "img:1", [NodePlan("control-plane", None, _profile("1"))])
    (patch,) = [yaml.safe_load(p) for p in kind_config(plan, workdir)["nodes"][0]["kubeadmConfigPatches"]]
    assert patch["kind"] == "InitConfiguration"
    assert patch["nodeRegistration"]["kubeletExtraArgs"]["reserved-cpus"] == "1"


def test_static_policy_without_reserved_cpus_is_a_config_error():
    with pytest.raises(ConfigError, match="reservedSystemCPUs"):
        kubelet_args(_profile(""))


def test_reserved_cpus_outside_the_topology_are_rejected(workdir):
    plan = ClusterPlan("cci-w", "img:1", [
        NodePlan("control-plane"), NodePlan("worker", library.load("laptop-1s4c-smt2"), _profile("0,9"))])
    with pytest.raises(ConfigError, match="not in topology"):
        kind_config(plan, workdir)


def test_first_node_must_be_the_control_plane(workdir):
    with pytest.raises(ConfigError, match="control plane"):
        kind_config(ClusterPlan("cci-v", "img:1", [NodePlan("worker")]), workdir)
