"""The node's use of the static CPU manager library: exclusive CPUs for static-QoS containers."""

from __future__ import annotations

from ..cpuset import CPUs
from ..topology.model import Topology
from .cci import Rejection
from .cpumanager.assignment import AllocationError, take_by_topology_numa_distributed, take_by_topology_numa_packed
from .cpumanager.topology import from_model
from .profile import NodeConfig

SMT_ALIGNMENT_ERROR = "SMTAlignmentError"
UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"


class StaticAllocator:
    """policy_static.go Allocate for one container, over an ``available`` set the node manages (one store)."""

    def __init__(self, topology: Topology, config: NodeConfig):
        self.topo = from_model(topology)
        self.config = config
        self.cpus_per_core = self.topo.cpus_per_core or 1
        # full-pcpus-only leaves out every core that has a reserved thread (reservedPhysicalCPUs)
        self._reserved_physical = frozenset(cpu for c in topology.cores if c & config.reserved for cpu in c)

    def allocate(self, num: int, available: CPUs) -> CPUs:
        if self.config.option("full-pcpus-only"):
            if num % self.cpus_per_core:
                raise Rejection(SMT_ALIGNMENT_ERROR, f"SMT Alignment Error: requested {num} cpus not multiple cpus "
                                                     f"per core = {self.cpus_per_core}")
            available = available - self._reserved_physical  # GetAvailablePhysicalCPUs
            physical = len(available)
            if num > physical:
                raise Rejection(SMT_ALIGNMENT_ERROR, "SMT Alignment Error: not enough free physical CPUs: "
                                f"available physical CPUs = {physical}, requested CPUs = {num}, "
                                f"CPUs per core = {self.cpus_per_core}")
        try:
            if self.config.option("distribute-cpus-across-numa"):
                group = self.cpus_per_core if self.config.option("full-pcpus-only") else 1
                return take_by_topology_numa_distributed(self.topo, available, num, group)
            return take_by_topology_numa_packed(self.topo, available, num)
        except AllocationError as exc:
            # the kubelet's admit handler wraps unexpected allocation errors this way (topologymanager admit)
            raise Rejection(UNEXPECTED_ADMISSION_ERROR,
                            f"Allocate failed due to {exc}, which is unexpected") from None
