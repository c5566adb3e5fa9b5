"""Faked machines: topology specs, sysfs rendering and reading."""

from .model import CPU, Cache, NumaNode, PciDevice, Topology

__all__ = ["CPU", "Cache", "NumaNode", "PciDevice", "Topology"]
