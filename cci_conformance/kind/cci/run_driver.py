"""The run's driver DaemonSet, which also shows the driver the faked machine's PCI devices (device affinity)."""

from __future__ import annotations

import io
import posixpath
import subprocess
import tarfile
from pathlib import Path

from ..cluster.lifecycle import KindCluster
from . import manifests
from .deploy import apply_and_register
from .manifests import SYSFS_ROOT, CCIDriverDeployment

# Where the worker keeps a copy of the faked machine's PCI tree: kind mounts only its cpu and node dirs into
# the node (cluster/config.py), and the driver reads /sys/bus/pci/devices/<address>/numa_node (spec S2.7).
PCI_COPY = "/var/lib/cci-conformance/machine"
COPY_TIMEOUT_S = 60


def pci_tar(machine: Path) -> tuple[bytes, list[str]]:
    """A tar of the machine's ``sys/bus/pci`` (symlinks kept) and ``sys/devices/pci*`` trees; and the roots."""
    sys_dir = machine / "sys"
    buffer = io.BytesIO()
    roots = []
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for root in [sys_dir / "bus", *sorted(sys_dir.glob("devices/pci*"))]:
            if root.exists():
                tar.add(root, arcname=str(root.relative_to(machine)))  # symlinks stay links (relative ones)
                roots.append(str(root.relative_to(sys_dir)))
    return buffer.getvalue(), roots


def copy_pci(node: str, machine: Path) -> list[str]:
    """Put the PCI tree into the worker under PCI_COPY; returns the sysfs-relative roots copied."""
    data, roots = pci_tar(machine)
    if not roots:
        return []
    subprocess.run(["docker", "exec", node, "mkdir", "-p", PCI_COPY], check=True, capture_output=True,
                   timeout=COPY_TIMEOUT_S)
    subprocess.run(["docker", "cp", "-", f"{node}:{PCI_COPY}"], input=data, check=True, capture_output=True,
                   timeout=COPY_TIMEOUT_S)
    return roots


def daemonset(plan: CCIDriverDeployment, pci_roots: list[str]) -> dict:
    """manifests.daemonset with the PCI roots mounted read-only under {sysfs_root}."""
    ds = manifests.daemonset(plan)
    pod = ds["spec"]["template"]["spec"]
    for i, rel in enumerate(pci_roots):
        name = f"sysfs-pci-{i}"
        pod["volumes"].append({"name": name, "hostPath": {"path": posixpath.join(PCI_COPY, "sys", rel),
                                                          "type": "Directory"}})
        pod["containers"][0]["volumeMounts"].append({"name": name, "mountPath": posixpath.join(SYSFS_ROOT, rel),
                                                     "readOnly": True})
    return ds


def deploy(cluster: KindCluster, plan: CCIDriverDeployment, archive: Path, slots: int, machine: Path,
           timeout: float = 120) -> float:
    """As deploy.deploy, with the PCI tree: load the image, copy the tree, apply class, slice and DaemonSet,
    wait until the kubelet answered the driver's registration; returns seconds from apply to registration."""
    cluster.load_archive(archive, [plan.node_name])
    roots = copy_pci(plan.node_name, machine)
    items = [manifests.device_class(plan.driver_name),
             manifests.resource_slice(plan.driver_name, plan.node_name, slots), daemonset(plan, roots)]
    return apply_and_register(cluster, plan, items, timeout)
