"""The kubelet's static CPU manager as a pure library: topology, CPU selection, policy and checkpoint file."""

from ...cpu_manager_state import (
    CPUManagerState,
    CPUManagerStateError,
    dumps,
    loads,
    read_state_file,
    write_state_file,
)
from .assignment import AllocationError, take_by_topology_numa_packed
from .distributed import take_by_topology_numa_distributed
from .options import PolicyOptionError, StaticPolicyOptions, parse_options
from .qos import exclusive_cpus, pod_qos_class
from .quantity import QuantityError, cpu_milli, memory_bytes, parse_quantity
from .static_policy import PolicyError, SMTAlignmentError, StateValidationError, StaticPolicy
from .topology import CPUDetails, CPUInfo, CPUTopology, build_cpu_topology, from_model

__all__ = [
    "AllocationError",
    "CPUDetails",
    "CPUInfo",
    "CPUManagerState",
    "CPUManagerStateError",
    "CPUTopology",
    "PolicyError",
    "PolicyOptionError",
    "QuantityError",
    "SMTAlignmentError",
    "StateValidationError",
    "StaticPolicy",
    "StaticPolicyOptions",
    "build_cpu_topology",
    "cpu_milli",
    "dumps",
    "exclusive_cpus",
    "from_model",
    "loads",
    "memory_bytes",
    "parse_options",
    "parse_quantity",
    "pod_qos_class",
    "read_state_file",
    "take_by_topology_numa_distributed",
    "take_by_topology_numa_packed",
    "write_state_file",
]
