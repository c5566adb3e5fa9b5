"""The machine the node runs on, read from its sysfs root as the kubelet's cAdvisor reads /sys."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from ..topology.model import Topology
from ..topology.sysfs_reader import read_sysfs


def read_machine(sys_root: Path) -> Topology:
    """Read the topology under ``sys_root``; ConfigError when it is not a sysfs tree with online CPUs."""
    if not (Path(sys_root) / "devices" / "system" / "cpu").is_dir():
        raise ConfigError(f"{sys_root} has no devices/system/cpu", field="sysfsRoot",
                          fix="point sysfsRoot at a rendered topology's sys directory")
    topology = read_sysfs(Path(sys_root))
    if not topology.cpus:
        raise ConfigError(f"{sys_root} shows no online CPU", field="sysfsRoot", fix="render a topology there")
    return topology
