"""The Kubernetes objects that run a dra/v1 manifest's DRA CPU driver on a kind worker: RBAC, DeviceClass, DaemonSet."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from ..cpuset import format_cpulist
from ..errors import ConfigError
from .api import DEVICE_MODES

# Every driver is deployed the way kubernetes-sigs/dra-driver-cpu is (its flags, HOST_ROOT and mounts are the
# convention; our reference driver follows it); a manifest names its own program and DRA driver name.
DRIVER_NAME = "dra.cpu"  # dra-driver-cpu's, fixed in its source (cmd/dracpu); also the DeviceClass name
NAMESPACE = "kube-system"  # system-node-critical pods are admitted only there by default
APP = "cci-dra-cpu"
# dra-driver-cpu prefixes every sysfs path with $HOST_ROOT/sys (pkg/cpuinfo hostSys; "/" when unset).
HOST_ROOT = "/host"
# What dra-driver-cpu v0.2.0 reads below $HOST_ROOT/sys, from its source (pkg/cpuinfo): online CPUs, per-CPU
# topology and caches, NUMA cpulists, SMT control under devices/system/{cpu,node}; the E-core list
# of hybrid machines under devices/cpu_atom. PCIe roots are read only with --expose-pcie-roots,
# which the harness never sets.
SYSFS_READS = ("devices/system/cpu", "devices/system/node")
HYBRID_SYSFS_READS = ("devices/cpu_atom",)
GROUP_BY = ("numanode", "socket")


@dataclass(frozen=True)
class DriverDeployment:
    """How the driver's DaemonSet is set up on the worker under test."""

    image: str
    node_name: str
    device_mode: str = "individual"
    group_by: str = "numanode"
    reserved_cpus: frozenset[int] = frozenset()
    hybrid: bool = False  # the topology has P/E cores: also show devices/cpu_atom
    log_level: int = 4
    healthz_port: int = 8080
    # Where the node shows the faked machine's sysfs: "/sys" when our kind config mounts it over the
    # node's own; another path when only the driver is shown it (cluster.config NodePlan.machine_root).
    node_sysfs: str = "/sys"
    extra_args: tuple[str, ...] = field(default=())
    # The driver's program inside its image and its DRA driver name (the DeviceClass the harness creates); the
    # defaults are dra-driver-cpu's.
    program: str = "/dracpu"
    driver_name: str = DRIVER_NAME

    def __post_init__(self) -> None:
        if self.device_mode not in DEVICE_MODES:
            raise ConfigError(f"unknown device mode {self.device_mode!r}", field="device_mode",
                              fix=f"use one of {', '.join(DEVICE_MODES)}")
        if self.group_by not in GROUP_BY:
            # "machine" needs an external scheduler to pick the CPUs (driver README); no harness scheduler does.
            raise ConfigError(f"unsupported group-by {self.group_by!r}", field="group_by",
                              fix=f"use one of {', '.join(GROUP_BY)}")
        if not self.image or ":" not in self.image.rsplit("/", 1)[-1]:
            raise ConfigError(f"image {self.image!r} has no tag", field="image",
                              fix="name the image as its build printed it, <repository>:<tag>")

    def args(self) -> list[str]:
        argv = [self.program, f"--v={self.log_level}", f"--cpu-device-mode={self.device_mode}",
                f"--bind-address=:{self.healthz_port}", f"--hostname-override={self.node_name}"]
        if self.device_mode == "grouped":
            argv.append(f"--group-by={self.group_by}")
        if self.reserved_cpus:
            argv.append(f"--reserved-cpus={format_cpulist(self.reserved_cpus)}")
        return argv + list(self.extra_args)

    def sysfs_reads(self) -> tuple[str, ...]:
        return SYSFS_READS + (HYBRID_SYSFS_READS if self.hybrid else ())


def _host_dir(name: str, node_path: str, container_path: str, *, read_only: bool = False,
              create: bool = False) -> tuple[dict, dict]:
    volume = {"name": name, "hostPath": {"path": node_path, "type": "DirectoryOrCreate" if create else "Directory"}}
    mount = {"name": name, "mountPath": container_path, **({"readOnly": True} if read_only else {})}
    return volume, mount


def _volumes(plan: DriverDeployment) -> list[tuple[dict, dict]]:
    pairs = [
        # The kubelet's DRA plugin dir (the driver's socket lives in plugins/dra.cpu) and the
        # plugin-registration dir the kubelet watches (KEP-4381 kubelet plugin API).
        _host_dir("kubelet-plugins", "/var/lib/kubelet/plugins", "/var/lib/kubelet/plugins"),
        _host_dir("plugins-registry", "/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins_registry"),
        # containerd's NRI socket (nri.sock): the driver connects as an external NRI plugin.
        _host_dir("nri", "/var/run/nri", "/var/run/nri"),
        # CDI specs the driver writes so the runtime injects DRA_CPUSET_<claim> into claimed containers.
        _host_dir("cdi", "/var/run/cdi", "/var/run/cdi", create=True),
        # The kubelet's state dir, read-only below HOST_ROOT as sysfs is: cpu_manager_state names the CPUs its
        # static policy pinned, which a driver must not grant again (ACCT-603; our reference reads it). The
        # directory, not the file: the kubelet replaces the file by a rename, which a file bind mount never sees.
        _host_dir("kubelet-state", "/var/lib/kubelet", posixpath.join(HOST_ROOT, "var/lib/kubelet"), read_only=True),
    ]
    # The faked machine: on a kind worker of ours, the rendered tree is bind-mounted over the node's
    # /sys/devices/system/{cpu,node} (docs/kind.md "Clusters"); show exactly those under HOST_ROOT.
    for rel in plan.sysfs_reads():
        name = "sysfs-" + rel.replace("/", "-").replace("_", "-")
        pairs.append(_host_dir(name, posixpath.join(plan.node_sysfs, rel), posixpath.join(HOST_ROOT, "sys", rel),
                               read_only=True))
    return pairs


def daemonset(plan: DriverDeployment) -> dict:
    """The driver's DaemonSet, pinned to the worker under test, image loaded by kind (never pulled)."""
    pairs = _volumes(plan)
    labels = {"app": APP}
    container = {
        "name": "driver",
        "image": plan.image,
        "imagePullPolicy": "Never",
        # `command`, not `args`: the list starts with the program (the image's entrypoint). As `args`
        # dra-driver-cpu would run `/dracpu /dracpu --v=4 ...`, and Go's flag parsing stops at the first
        # non-flag, so every flag would be silently ignored (the driver then runs its defaults:
        # grouped mode, found so on kind).
        "command": plan.args(),
        "env": [{"name": "HOST_ROOT", "value": HOST_ROOT}],
        "ports": [{"name": "healthz", "containerPort": plan.healthz_port}],
        # /healthz answers 200 only after the driver published its slices and started its NRI plugin;
        # readiness is what the harness waits for before creating claims.
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": "healthz"}, "periodSeconds": 2},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "healthz"}, "initialDelaySeconds": 10},
        "resources": {"requests": {"cpu": "100m", "memory": "50Mi"}},
        # The capabilities the driver's own deployment asks for.
        "securityContext": {"capabilities": {"add": ["NET_ADMIN", "SYS_ADMIN"]}},
        "volumeMounts": [mount for _, mount in pairs],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": APP, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    # The driver names its ResourceSlices after the node; with host networking the
                    # hostname is the node's, and --hostname-override makes it explicit.
                    "hostNetwork": True,
                    "nodeSelector": {"kubernetes.io/hostname": plan.node_name},
                    "priorityClassName": "system-node-critical",
                    "serviceAccountName": APP,
                    "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [container],
                    "volumes": [volume for volume, _ in pairs],
                },
            },
        },
    }


def rbac() -> list[dict]:
    """ServiceAccount, ClusterRole and binding: what the driver calls on the API server, nothing more."""
    rules = [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
         "verbs": ["list", "watch", "create", "update", "delete"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims", "deviceclasses"], "verbs": ["get"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/status"], "verbs": ["patch", "update"]},
    ]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": APP, "namespace": NAMESPACE}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": APP},
         "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": APP},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": APP},
         "subjects": [{"kind": "ServiceAccount", "name": APP, "namespace": NAMESPACE}]},
    ]


def device_class(driver: str = DRIVER_NAME) -> dict:
    """The DeviceClass claims name (resource.k8s.io/v1, GA in Kubernetes 1.34): every device of the driver."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": driver},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
    }


def objects(plan: DriverDeployment) -> list[dict]:
    """Everything to apply, in order: RBAC, DeviceClass, DaemonSet."""
    return [*rbac(), device_class(plan.driver_name), daemonset(plan)]


def unmounted_reads(manifest: dict, reads: tuple[str, ...]) -> list[str]:
    """Sysfs paths (relative to $HOST_ROOT/sys) the driver reads that no mount of ``manifest`` shows it.

    A read outside the mounts falls through to the node's real /sys: the driver would describe the
    host, not the faked machine, and every attribute check would compare against the wrong topology.
    """
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value", "") for e in container.get("env", [])}
    root = posixpath.join(env.get("HOST_ROOT", "/"), "sys")
    mounted = [m["mountPath"] for m in container["volumeMounts"]]
    missing = []
    for rel in reads:
        path = posixpath.join(root, rel)
        if not any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounted):
            missing.append(rel)
    return missing
