"""Generate a kind cluster config from node plans: fake topology mounts and CPU-manager settings per node."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ...cpuset import format_cpulist
from ...errors import ConfigError
from ...node.profile import NodeConfig
from ...topology import render
from ...topology.model import Topology
from ..image import versions

KIND_API = "kind.x-k8s.io/v1alpha4"
# kind writes the kubeadm v1beta3 API for Kubernetes 1.23-1.35 nodes (maps for kubeletExtraArgs), v1beta4
# from 1.36 (lists of {name, value}); a node patch must carry the API version kind writes (ClusterPlan.release).
KUBEADM_API = versions.CCI.kubeadm_api


@dataclass
class NodePlan:
    """One kind node: its role, the topology its kubelet sees (None: the real machine) and its CPU manager."""

    role: str = "worker"
    topology: Topology | None = None
    profile: NodeConfig | None = None
    labels: dict[str, str] = field(default_factory=dict)
    # Where in the node the faked machine is mounted. "/" (default): over the node's own /sys and
    # /proc/cpuinfo, so the kubelet sees it too. Another path: only what reads that path (a driver's
    # hostPath) sees it, and the kubelet sees the real host (see machine_mounts).
    machine_root: str = "/"
    # More kubelet flags for this node (kubeletExtraArgs), e.g. the kind backend's shorter CPU-manager reconcile
    # period; they cannot override the CPU manager's own flags (kubelet_args).
    kubelet_flags: dict[str, str] = field(default_factory=dict)


@dataclass
class ClusterPlan:
    name: str
    image: str
    nodes: list[NodePlan]
    # Kubernetes feature gates for every component of every node (kind's cluster-wide featureGates).
    feature_gates: dict[str, bool] = field(default_factory=dict)
    # The release the image was built for: it decides the kubeadm API of the node patches.
    release: versions.Release = versions.CCI

    def node_names(self) -> list[str]:
        """Container names kind gives the nodes: <name>-control-plane, <name>-worker, <name>-worker2, ..."""
        names, workers, planes = [], 0, 0
        for node in self.nodes:
            if node.role == "control-plane":
                planes += 1
                names.append(f"{self.name}-control-plane" + (str(planes) if planes > 1 else ""))
            else:
                workers += 1
                names.append(f"{self.name}-worker" + (str(workers) if workers > 1 else ""))
        return names


def kubelet_args(profile: NodeConfig) -> dict[str, str]:
    """kubelet flags for one node's CPU manager (kubeadm accepts no per-node KubeletConfiguration on join)."""
    args = {"cpu-manager-policy": profile.policy}
    if profile.policy == "static":
        if not profile.reserved:
            # The kubelet refuses the static policy without any reserved CPU.
            raise ConfigError("the static CPU manager policy needs reserved CPUs", field="reservedSystemCPUs",
                              fix='set reservedSystemCPUs, e.g. "0"')
        args["reserved-cpus"] = format_cpulist(profile.reserved)
        enabled = [f"{name}=true" for name, on in sorted(profile.options.items()) if on]
        if enabled:
            args["cpu-manager-policy-options"] = ",".join(enabled)
    return args


def _check_plan(plan: ClusterPlan) -> None:
    if not plan.nodes or plan.nodes[0].role != "control-plane":
        raise ConfigError("the first node must be the control plane", field="nodes[0].role",
                          fix="put a control-plane node first")
    for i, node in enumerate(plan.nodes):
        if node.role not in ("control-plane", "worker"):
            raise ConfigError(f"{node.role!r} is not a kind node role", field=f"nodes[{i}].role",
                              fix="use control-plane or worker")
        if node.profile and node.topology is not None:
            unknown = node.profile.reserved - frozenset(node.topology.online_cpus)
            if unknown:
                raise ConfigError(f"reserved CPUs {format_cpulist(unknown)} are not in topology "
                                  f"{node.topology.name}", field=f"nodes[{i}].reservedSystemCPUs",
                                  fix="reserve CPUs that the topology has")


def _mounts(machine: Path, root: str = "/") -> list[dict]:
    sys_dir = machine / "sys" / "devices" / "system"
    inside = root.rstrip("/")
    return [
        {"hostPath": str(sys_dir / "cpu"), "containerPath": f"{inside}/sys/devices/system/cpu", "readOnly": True},
        {"hostPath": str(sys_dir / "node"), "containerPath": f"{inside}/sys/devices/system/node", "readOnly": True},
        {"hostPath": str(machine / "proc" / "cpuinfo"), "containerPath": f"{inside}/proc/cpuinfo", "readOnly": True},
    ]


def kind_config(plan: ClusterPlan, workdir: Path) -> dict:
    """The kind config as a mapping; renders each faked topology under ``workdir/<node name>``."""
    _check_plan(plan)
    nodes = []
    for node, node_name in zip(plan.nodes, plan.node_names(), strict=True):
        entry: dict = {"role": node.role, "image": plan.image}
        if node.labels:
            entry["labels"] = dict(node.labels)
        if node.topology is not None:
            machine = render.render(node.topology, workdir / node_name)
            entry["extraMounts"] = _mounts(machine, node.machine_root)
        if node.profile is not None:
            kind = "InitConfiguration" if node is plan.nodes[0] else "JoinConfiguration"
            args = kubelet_args(node.profile)
            clash = sorted(set(node.kubelet_flags) & set(args))
            if clash:
                raise ConfigError(f"kubelet flag --{clash[0]} is set by the node profile", field="kubelet_flags",
                                  fix="set the CPU manager through the node profile, not as an extra flag")
            flags = {**args, **node.kubelet_flags}
            if plan.release.kubeadm_api == "kubeadm.k8s.io/v1beta3":
                extra: dict | list = flags
            else:  # v1beta4: an ordered list of {name, value}
                extra = [{"name": name, "value": value} for name, value in flags.items()]
            patch = {"apiVersion": plan.release.kubeadm_api, "kind": kind,
                     "nodeRegistration": {"kubeletExtraArgs": extra}}
            entry["kubeadmConfigPatches"] = [yaml.safe_dump(patch, sort_keys=True)]
        nodes.append(entry)
    # Cluster-wide: the kubelet must never write host-global kernel sysctls (the node image shows it
    # the values it wants on read-only files; with this it fails instead of writing if that broke).
    kubelet_patch = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
                     "protectKernelDefaults": True}
    if plan.release.refuses_cgroup_v1:
        # kind's hosts here are cgroup v1 (docs/kind.md); such a kubelet runs there only when told to (KEP-5573).
        kubelet_patch["failCgroupV1"] = False
    config = {
        "kind": "Cluster",
        "apiVersion": KIND_API,
        # Always named: tools that delete by name must find what they created.
        "name": plan.name,
        "nodes": nodes,
        "kubeadmConfigPatches": [yaml.safe_dump(kubelet_patch, sort_keys=True)],
    }
    if plan.feature_gates:
        config["featureGates"] = dict(plan.feature_gates)
    return config


def write_kind_config(plan: ClusterPlan, workdir: Path) -> Path:
    path = workdir / "kind-config.yaml"
    path.write_text(yaml.safe_dump(kind_config(plan, workdir), sort_keys=False))
    return path
