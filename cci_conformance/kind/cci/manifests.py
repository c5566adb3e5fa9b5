"""The Kubernetes objects the harness writes to put a CCI driver under a CCI-patched kubelet on a kind worker."""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass

from ...drivers.manifest import DriverManifest, substitute
from ...errors import ConfigError

NAMESPACE = "kube-system"  # system-node-critical pods are admitted only there by default
APP = "cci-driver"
KUBELET_ROOT = "/var/lib/kubelet"
# The kubelet's plugin watcher dir, and the dir its CCI handler accepts endpoints under (docs/spec.md S1.2,
# kubelet-cci registry.go ValidateInfo: "<kubelet-root>/plugins/").
REGISTRY_DIR = posixpath.join(KUBELET_ROOT, "plugins_registry")
PLUGINS_DIR = posixpath.join(KUBELET_ROOT, "plugins")
# {sysfs_root} inside the driver container; on a faked worker the node's /sys/devices/system/{cpu,node}
# are the rendered topology (docs/kind.md "Clusters"), shown here read-only.
SYSFS_ROOT = "/host/sys"
SYSFS_SHOWN = ("devices/system/cpu", "devices/system/node")
# {state_dir}: on the node, so a driver restarted in a new pod finds its admissions (spec S1.9).
STATE_ROOT = "/var/lib/cci-drivers"
# The one request name of CCI claims: the opaque config names it (kubelet-cci/README.md "Claims").
REQUEST = "cpus"
API_RESOURCE = "resource.k8s.io/v1"  # DRA's GA API in Kubernetes 1.34


@dataclass(frozen=True)
class CCIDriverDeployment:
    """One CCI driver DaemonSet on the worker under test; its argv is the manifest's ``local.command``."""

    manifest: DriverManifest
    image: str
    node_name: str
    driver_name: str
    binary: str = "/go-reference"  # the image's entrypoint stands for local.command[0] (when no command is given)
    # The container's argv template (driver_image.KindDriverImage.command); {python} is the image's interpreter.
    command: tuple[str, ...] = ()
    python: str = ""
    working_dir: str = ""
    env: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        # The name is the DRA driver name of the ResourceSlices too: a DNS subdomain of at most 63 chars.
        labels = self.driver_name.split(".")
        if len(self.driver_name) > 63 or not all(lab and lab.replace("-", "a").isalnum() and lab == lab.lower()
                                                 and lab[0] != "-" and lab[-1] != "-" for lab in labels):
            raise ConfigError(f"{self.driver_name!r} is not a DRA driver name", field="driver_name",
                              fix="use a lower-case DNS subdomain of at most 63 characters, e.g. cci.example.com")
        if ":" not in self.image.rsplit("/", 1)[-1]:
            raise ConfigError(f"image {self.image!r} has no tag", field="image",
                              fix="use the tagged reference the image build returns (driver_image.for_manifest)")

    @property
    def plugin_dir(self) -> str:
        return posixpath.join(PLUGINS_DIR, self.driver_name)

    @property
    def state_dir(self) -> str:
        return posixpath.join(STATE_ROOT, self.driver_name)

    @property
    def registration_socket(self) -> str:
        return posixpath.join(REGISTRY_DIR, f"{self.driver_name}-reg.sock")

    def argv(self) -> list[str]:
        values = self.manifest.values(registry_dir=REGISTRY_DIR, plugin_dir=self.plugin_dir, sysfs_root=SYSFS_ROOT,
                                      state_dir=self.state_dir, driver_name=self.driver_name)
        if self.command:
            return [substitute(arg, {**values, "python": self.python}) for arg in self.command]
        return [self.binary, *[substitute(arg, values) for arg in self.manifest.command[1:]]]


def _host_dir(name: str, path: str, inside: str, *, read_only: bool = False, create: bool = False):
    volume = {"name": name, "hostPath": {"path": path, "type": "DirectoryOrCreate" if create else "Directory"}}
    return volume, {"name": name, "mountPath": inside, **({"readOnly": True} if read_only else {})}


def daemonset_name(plan: CCIDriverDeployment) -> str:
    """``cci-driver-<driver>-<worker>`` (e.g. cci-driver-reference-worker2), cut to a DNS label."""
    worker = plan.node_name.rsplit("-", 1)[-1]
    return f"{APP}-{plan.driver_name.split('.')[0]}-{worker}"[:57].rstrip("-")


def daemonset(plan: CCIDriverDeployment) -> dict:
    """The driver's DaemonSet: sockets at the node's own paths (the kubelet dials the endpoint the driver
    reports), the faked sysfs under {sysfs_root}, the state on the node; never pulled, pinned to the worker."""
    pairs = [
        _host_dir("registry", REGISTRY_DIR, REGISTRY_DIR),
        _host_dir("plugin", plan.plugin_dir, plan.plugin_dir, create=True),
        _host_dir("state", plan.state_dir, plan.state_dir, create=True),
    ]
    for rel in SYSFS_SHOWN:
        pairs.append(_host_dir("sysfs-" + rel.rsplit("/", 1)[-1], posixpath.join("/sys", rel),
                               posixpath.join(SYSFS_ROOT, rel), read_only=True))
    # One DaemonSet per worker (a run has a worker per machine): named and labelled by its node too, or the
    # apply for the next worker would take the first one's over.
    labels = {"app": APP, "cci-driver": plan.driver_name, "cci-node": plan.node_name}
    container = {
        "name": "driver",
        "image": plan.image,
        "imagePullPolicy": "Never",
        "command": plan.argv(),
        "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}},  # Burstable: runs on the shared pool
        "volumeMounts": [mount for _, mount in pairs],
    }
    if plan.working_dir:
        container["workingDir"] = plan.working_dir
    if plan.env or plan.manifest.env:
        env = {**dict(plan.env), **plan.manifest.environment(
            registry_dir=REGISTRY_DIR, plugin_dir=plan.plugin_dir, sysfs_root=SYSFS_ROOT, state_dir=plan.state_dir,
            driver_name=plan.driver_name)}
        container["env"] = [{"name": k, "value": v} for k, v in sorted(env.items())]
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": daemonset_name(plan), "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {
                "nodeSelector": {"kubernetes.io/hostname": plan.node_name},
                "priorityClassName": "system-node-critical",
                "tolerations": [{"operator": "Exists"}],
                # SIGTERM removes both sockets (spec S1.9): the kubelet deregisters the driver at once.
                "terminationGracePeriodSeconds": 10,
                "containers": [container],
                "volumes": [volume for volume, _ in pairs],
            }},
        },
    }


def device_class(driver_name: str) -> dict:
    """The class CCI claims name: every device of the CCI driver (KEP-3675 alpha, l.419-425)."""
    return {"apiVersion": API_RESOURCE, "kind": "DeviceClass", "metadata": {"name": driver_name},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver_name}"'}}]}}


def resource_slice(driver_name: str, node: str, slots: int) -> dict:
    """One node's slice: ``slots`` admission slots, each a device one claim takes.

    The CCI driver talks to no API server, so the harness publishes for it. A device is a slot, not a
    CPU: the scheduler only picks the node; which CPUs, and whether they fit, the driver decides at the
    kubelet's admission (a claim that does not fit fails there, with CCIAdmitError). One slot per
    allocatable CPU is an upper bound on the claims a node can hold (each takes at least one CPU).
    """
    if slots < 1:
        raise ConfigError(f"{slots} slots for node {node}", field="slots", fix="publish at least one slot")
    return {
        "apiVersion": API_RESOURCE, "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver_name}"},
        "spec": {"driver": driver_name, "nodeName": node,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"slot-{i}"} for i in range(slots)]},
    }


def resource_claim(name: str, driver_name: str, parameters: dict, namespace: str = "default") -> dict:
    """A claim of one slot whose opaque config carries the CCI claim parameters (docs/spec.md S2.1, S3.9)."""
    return {
        "apiVersion": API_RESOURCE, "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {
            "requests": [{"name": REQUEST, "exactly": {"deviceClassName": driver_name}}],
            "config": [{"requests": [REQUEST],
                        "opaque": {"driver": driver_name, "parameters": parameters}}],
        }},
    }


def claim_pod(name: str, claim: str, node: str, image: str, namespace: str = "default") -> dict:
    """A pod whose one container takes its CPUs from ``claim``; the scheduler places it (DRA allocates only for
    scheduled pods), the node selector keeps it on the worker under test."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "resourceClaims": [{"name": "cci", "resourceClaimName": claim}],
            "containers": [{"name": "c0", "image": image, "imagePullPolicy": "Never",
                            "resources": {"claims": [{"name": "cci"}]}}],
            "terminationGracePeriodSeconds": 0, "restartPolicy": "Never",
        },
    }


def objects(plan: CCIDriverDeployment, slots: int) -> list[dict]:
    """Everything the driver needs, in order: DeviceClass, the worker's ResourceSlice, DaemonSet."""
    return [device_class(plan.driver_name), resource_slice(plan.driver_name, plan.node_name, slots), daemonset(plan)]


def handle_of(parameters: dict) -> str:
    """The ``resource_handle`` the patched kubelet sends for these parameters (kubelet-cci README "Claims")."""
    return json.dumps(parameters, sort_keys=True)
