"""The objects the harness writes to run a DRA CPU driver on a kind worker (dra-driver-cpu's conventions)."""

from __future__ import annotations

import pytest
import yaml

from cci_conformance.dra import deployment as m
from cci_conformance.errors import ConfigError

IMAGE = "localhost/cci-conformance/dra-driver-cpu:v0.2.0"


def _plan(**kwargs) -> m.DriverDeployment:
    return m.DriverDeployment(image=IMAGE, node_name="cci-run-worker", **kwargs)


def _container(manifest: dict) -> dict:
    return manifest["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("hybrid", [False, True])
def test_every_sysfs_path_the_driver_reads_is_the_faked_one(hybrid):
    plan = _plan(hybrid=hybrid)
    ds = m.daemonset(plan)
    assert m.unmounted_reads(ds, plan.sysfs_reads()) == []
    volumes = {v["name"]: v["hostPath"]["path"] for v in ds["spec"]["template"]["spec"]["volumes"]}
    mounts = {mt["mountPath"]: mt for mt in _container(ds)["volumeMounts"]}
    # The node path is where our kind config bind-mounts the rendered tree; the driver sees it under HOST_ROOT.
    cpu = mounts["/host/sys/devices/system/cpu"]
    assert volumes[cpu["name"]] == "/sys/devices/system/cpu" and cpu["readOnly"] is True
    assert volumes[mounts["/host/sys/devices/system/node"]["name"]] == "/sys/devices/system/node"
    assert {"name": "HOST_ROOT", "value": "/host"} in _container(ds)["env"]
    assert ("/host/sys/devices/cpu_atom" in mounts) is hybrid


def test_a_missing_sysfs_mount_is_reported():
    plan = _plan(hybrid=True)
    ds = m.daemonset(plan)
    _container(ds)["volumeMounts"] = [mt for mt in _container(ds)["volumeMounts"]
                                      if mt["mountPath"] != "/host/sys/devices/system/node"]
    assert m.unmounted_reads(ds, plan.sysfs_reads()) == ["devices/system/node"]
    # Without HOST_ROOT the driver reads the node's real /sys: nothing is covered.
    _container(ds)["env"] = []
    assert m.unmounted_reads(ds, plan.sysfs_reads()) == list(plan.sysfs_reads())


def test_kubelet_nri_and_cdi_dirs_are_the_nodes():
    ds = m.daemonset(_plan())
    volumes = {v["name"]: v["hostPath"] for v in ds["spec"]["template"]["spec"]["volumes"]}
    mounts = {mt["mountPath"]: volumes[mt["name"]] for mt in _container(ds)["volumeMounts"]}
    assert mounts["/var/lib/kubelet/plugins"]["path"] == "/var/lib/kubelet/plugins"
    assert mounts["/var/lib/kubelet/plugins_registry"]["path"] == "/var/lib/kubelet/plugins_registry"
    # Directory, not DirectoryOrCreate: a node without NRI must make the pod fail, not run a driver that pins nothing.
    assert mounts["/var/run/nri"] == {"path": "/var/run/nri", "type": "Directory"}
    assert mounts["/var/run/cdi"]["type"] == "DirectoryOrCreate"
    names = [v["name"] for v in ds["spec"]["template"]["spec"]["volumes"]]
    assert len(names) == len(set(names))


def test_the_kubelets_state_dir_is_shown_read_only_below_host_root():
    ds = m.daemonset(_plan())
    volumes = {v["name"]: v["hostPath"] for v in ds["spec"]["template"]["spec"]["volumes"]}
    state = next(mt for mt in _container(ds)["volumeMounts"] if mt["mountPath"] == "/host/var/lib/kubelet")
    # the directory: the kubelet renames a new cpu_manager_state over the old one, which a file mount would miss
    assert volumes[state["name"]] == {"path": "/var/lib/kubelet", "type": "Directory"}
    assert state["readOnly"] is True


def test_flags_image_and_placement():
    ds = m.daemonset(_plan(reserved_cpus=frozenset({0, 1, 2, 8})))
    container = _container(ds)
    assert container["image"] == IMAGE and container["imagePullPolicy"] == "Never"
    assert container["command"][:3] == ["/dracpu", "--v=4", "--cpu-device-mode=individual"]
    # As `args` after the image's entrypoint the program name would end flag parsing: no flag would apply.
    assert "args" not in container
    assert "--reserved-cpus=0-2,8" in container["command"]
    assert "--hostname-override=cci-run-worker" in container["command"]
    assert not any(a.startswith("--group-by") for a in container["command"])
    spec = ds["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"kubernetes.io/hostname": "cci-run-worker"} and spec["hostNetwork"] is True
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"


def test_grouped_mode_groups():
    plan = _plan(device_mode="grouped", group_by="socket")
    assert "--group-by=socket" in plan.args()
    assert not any(a.startswith("--group-by") for a in _plan().args())


@pytest.mark.parametrize("kwargs, field", [
    ({"device_mode": "per-cpu"}, "device_mode"),
    ({"group_by": "machine"}, "group_by"),
])
def test_bad_settings_name_the_field(kwargs, field):
    with pytest.raises(ConfigError) as err:
        _plan(**kwargs)
    assert f"{field}:" in str(err.value) and "fix:" in str(err.value)


def test_untagged_image_is_refused():
    with pytest.raises(ConfigError, match="image"):
        m.DriverDeployment(image="localhost/cci-conformance/dra-driver-cpu", node_name="w")


def test_device_class_and_rbac():
    dc = m.device_class()
    assert dc["apiVersion"] == "resource.k8s.io/v1" and dc["metadata"]["name"] == "dra.cpu"
    assert dc["spec"]["selectors"] == [{"cel": {"expression": 'device.driver == "dra.cpu"'}}]
    role = next(o for o in m.rbac() if o["kind"] == "ClusterRole")
    slices = next(r for r in role["rules"] if r["resources"] == ["resourceslices"])
    assert {"create", "update", "delete", "watch"} <= set(slices["verbs"])
    objs = m.objects(_plan())
    assert [o["kind"] for o in objs] == ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DeviceClass",
                                          "DaemonSet"]
    assert list(yaml.safe_load_all(yaml.safe_dump_all(objs))) == objs


def test_a_policy_none_worker_shows_the_faked_machine_to_the_driver_only(tmp_path):
    from cci_conformance.dra.kind_session import MACHINE_ROOT
    from cci_conformance.kind.cluster.config import ClusterPlan, NodePlan, kind_config
    from cci_conformance.topology import library

    worker = NodePlan("worker", library.load("laptop-1s4c-smt2"), None, machine_root=MACHINE_ROOT)
    plan = ClusterPlan("cci-x", "img", [NodePlan("control-plane"), worker])
    mounts = {mt["containerPath"] for mt in kind_config(plan, tmp_path)["nodes"][1]["extraMounts"]}
    # Nothing over the node's own /sys: the kubelet (policy none) sees the real host.
    assert mounts == {"/var/lib/cci-machine/sys/devices/system/cpu", "/var/lib/cci-machine/sys/devices/system/node",
                      "/var/lib/cci-machine/proc/cpuinfo"}
    deployment = _plan(node_sysfs=MACHINE_ROOT + "/sys")
    ds = m.daemonset(deployment)
    paths = {v["hostPath"]["path"] for v in ds["spec"]["template"]["spec"]["volumes"]}
    assert {"/var/lib/cci-machine/sys/devices/system/cpu", "/var/lib/cci-machine/sys/devices/system/node"} <= paths
    assert m.unmounted_reads(ds, deployment.sysfs_reads()) == []
