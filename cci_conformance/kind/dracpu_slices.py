"""The devices dra-driver-cpu publishes in its ResourceSlices, against the faked machine's sysfs truth."""

from __future__ import annotations

from ..cpuset import format_cpulist
from ..topology.model import Topology
from .dracpu_manifests import DRIVER_NAME

# Attribute names of v0.2.0 (pkg/driver/attributes.go), `individual` mode: one device per CPU.
CPU_ID = "dra.cpu/cpuID"
# The driver's names for core types (pkg/cpuinfo CoreType.String in v0.2.0).
_CORE_TYPE = {"": "standard", "p": "p-core", "e": "e-core"}


def _value(attribute: dict):
    for key in ("int", "bool", "string", "version"):
        if key in attribute:
            return attribute[key]
    return None


def devices(slices: list[dict], node: str, driver: str = DRIVER_NAME) -> dict[str, dict]:
    """Device name -> attribute values, over every slice ``driver`` published for ``node``."""
    out: dict[str, dict] = {}
    for item in slices:
        spec = item.get("spec", {})
        if spec.get("driver") != driver or spec.get("nodeName") != node:
            continue
        for device in spec.get("devices", []):
            out[device["name"]] = {k: _value(v) for k, v in device.get("attributes", {}).items()}
    return out


def device_cpus(published: dict[str, dict]) -> dict[str, int]:
    """Device name -> CPU id (individual mode)."""
    return {name: int(attrs[CPU_ID]) for name, attrs in published.items() if CPU_ID in attrs}


def allocated_cpus(claim: dict, cpu_of: dict[str, int]) -> frozenset[int]:
    """The CPUs a ResourceClaim's allocation names (status.allocation.devices.results of this driver)."""
    results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])
    return frozenset(cpu_of[r["device"]] for r in results if r.get("driver") == DRIVER_NAME and r["device"] in cpu_of)


def group_node_cpus(claim: dict, published: dict[str, dict], topology: Topology) -> tuple[set[int], frozenset[int]]:
    """`grouped` mode: the NUMA nodes of the group devices a claim's allocation names, and their CPUs."""
    results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])
    nodes = {published[r["device"]].get("dra.cpu/numaNodeID") for r in results
             if r.get("driver") == DRIVER_NAME and r["device"] in published}
    return nodes, frozenset().union(*(topology.node_cpus.get(n, frozenset()) for n in nodes))


def mismatches(topology: Topology, published: dict[str, dict], reserved: frozenset[int] = frozenset()) -> list[str]:
    """Every way the published devices differ from the machine: the CPU set, and each CPU's attributes."""
    problems: list[str] = []
    cpu_of = device_cpus(published)
    want = frozenset(topology.online_cpus) - reserved
    seen = list(cpu_of.values())
    if len(seen) != len(set(seen)):
        problems.append("a CPU is published by more than one device")
    if frozenset(seen) != want:
        problems.append(f"devices cover CPUs {format_cpulist(frozenset(seen))}, the node's online CPUs minus the "
                        f"reserved ones are {format_cpulist(want)}")
    l3 = {cpu: cache.id for cache in topology.caches if cache.level == 3 for cpu in cache.cpus}
    smt = topology.smt_control == "on"  # as the driver reads devices/system/cpu/smt/control
    by_id = topology.by_id
    for name, cpu_id in sorted(cpu_of.items(), key=lambda item: item[1]):
        cpu = by_id.get(cpu_id)
        if cpu is None:
            continue
        attrs = published[name]
        expected = {"dra.cpu/numaNodeID": cpu.node, "dra.cpu/socketID": cpu.package, "dra.cpu/coreID": cpu.core,
                    "dra.cpu/coreType": _CORE_TYPE[cpu.core_type], "dra.cpu/smtEnabled": smt,
                    "dra.cpu/cacheL3ID": l3.get(cpu_id, -1)}
        for key, value in expected.items():
            if attrs.get(key) != value:
                problems.append(f"{name} (cpu{cpu_id}): {key} is {attrs.get(key)!r}, sysfs says {value!r}")
    return problems


def split_cores(topology: Topology, cpus: frozenset[int]) -> list[frozenset[int]]:
    """The cores of ``cpus`` that it holds only in part (empty when ``cpus`` is whole cores)."""
    return [core & cpus for core in topology.cores if core & cpus and not core <= cpus]


def group_mismatches(topology: Topology, published: dict[str, dict],
                     reserved: frozenset[int] = frozenset()) -> list[str]:
    """`grouped` mode (one device per NUMA node): each device's node, socket and CPU count against sysfs."""
    problems: list[str] = []
    seen: set[int] = set()
    for name, attrs in sorted(published.items()):
        node = attrs.get("dra.cpu/numaNodeID")
        cpus = topology.node_cpus.get(node, frozenset()) - reserved
        seen.add(node)
        if attrs.get("dra.cpu/numCPUs") != len(cpus):
            problems.append(f"{name}: numCPUs is {attrs.get('dra.cpu/numCPUs')!r}, NUMA node {node} has {len(cpus)}")
        sockets = {topology.by_id[c].package for c in cpus}
        if sockets and attrs.get("dra.cpu/socketID") not in sockets:
            problems.append(f"{name}: socketID is {attrs.get('dra.cpu/socketID')!r}, "
                            f"node {node} is on {sorted(sockets)}")
    want = {n for n, cpus in topology.node_cpus.items() if cpus - reserved}
    if seen != want:
        problems.append(f"group devices for NUMA nodes {sorted(seen)}, the machine has {sorted(want)}")
    return problems
