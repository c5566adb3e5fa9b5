"""The node's use of the static CPU manager library: exclusive CPUs for static-QoS containers."""

from __future__ import annotations

from ..cpuset import CPUs, format_cpulist
from ..errors import ConfigError
from ..topology.model import Topology
from .cci import Rejection
from .cpumanager import AllocationError, CPUManagerState, PolicyError, StaticPolicy, from_model
from .profile import NodeConfig

SMT_ALIGNMENT_ERROR = "SMTAlignmentError"
UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"


def make_policy(topology: Topology, config: NodeConfig) -> StaticPolicy:
    """The kubelet's static policy for this machine and profile; ConfigError as the kubelet refuses to start."""
    options = {name: "true" if on else "false" for name, on in config.options.items()}
    try:
        return StaticPolicy(from_model(topology), config.reserved, options)
    except PolicyError as exc:
        raise ConfigError(str(exc), field="reservedSystemCPUs / cpuManagerPolicyOptions",
                          fix="reserve at least one CPU for the static policy and use options the machine allows") \
            from None


class StaticAllocator:
    """policy_static.go Allocate for one container, over the one store's shared pool and available CPUs."""

    def __init__(self, topology: Topology, config: NodeConfig):
        self.policy = make_policy(topology, config)

    def allocate(self, num: int, shared_pool: CPUs, available: CPUs) -> CPUs:
        """``shared_pool`` = the kubelet's defaultCpuSet; ``available`` = what nobody holds, minus reserved."""
        error = self.policy.smt_alignment_error(num, shared_pool)
        if error is not None:
            raise Rejection(SMT_ALIGNMENT_ERROR, str(error))
        try:
            cpus = self.policy.allocate_cpus(CPUManagerState("static", shared_pool), num, available)
        except AllocationError as exc:
            # the kubelet's admit handler wraps unexpected allocation errors this way (topologymanager admit)
            raise Rejection(UNEXPECTED_ADMISSION_ERROR, f"Allocate failed due to {exc}, which is unexpected") from None
        if not cpus <= available or len(cpus) != num:
            # never let a selection bug reach the store: refuse the pod, loudly, instead of double-granting
            raise Rejection(UNEXPECTED_ADMISSION_ERROR,
                            f"Allocate failed due to a static-policy selection of {format_cpulist(cpus)!r} for {num} "
                            f"CPUs outside the available {format_cpulist(available)!r} (a harness bug), which is "
                            "unexpected")
        return cpus
