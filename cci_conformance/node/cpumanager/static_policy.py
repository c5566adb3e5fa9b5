"""The kubelet's static CPU manager policy (policy_static.go) over a CPUManagerState."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ...cpu_manager_state import CPUManagerState
from ...cpuset import CPUs, format_cpulist
from ..api import ContainerSpec, PodSpec
from .assignment import PACKED, SPREAD, AllocationError, take_by_topology_numa_packed
from .distributed import take_by_topology_numa_distributed
from .options import StaticPolicyOptions, parse_options, validate_options
from .qos import exclusive_cpus
from .topology import CPUTopology

POLICY_NAME = "static"


class SMTAlignmentError(Exception):
    """``full-pcpus-only`` refused a container; ``str()`` is the kubelet's message, ``type`` its reason."""

    type = "SMTAlignmentError"

    def __init__(
        self, requested: int, cpus_per_core: int, available_physical: int = 0, caused_by_physical: bool = False
    ):
        self.requested = requested
        self.cpus_per_core = cpus_per_core
        self.available_physical = available_physical
        self.caused_by_physical = caused_by_physical
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.caused_by_physical:
            return (
                "SMT Alignment Error: not enough free physical CPUs: "
                f"available physical CPUs = {self.available_physical}, requested CPUs = {self.requested}, "
                f"CPUs per core = {self.cpus_per_core}"
            )
        return f"SMT Alignment Error: requested {self.requested} cpus not multiple cpus per core = {self.cpus_per_core}"


class PolicyError(ValueError):
    """The policy cannot be built (bad options or reserved CPUs); ``str()`` is the kubelet's text."""


class StateValidationError(Exception):
    """``validateState`` refused the state (the kubelet adds "please drain node and remove policy state file")."""


def _q(cpus: Iterable[int]) -> str:
    return '"' + format_cpulist(cpus) + '"'


class StaticPolicy:
    """Exclusive CPUs for integer-CPU containers of Guaranteed pods; everything else on the shared pool.

    The topology manager is taken to run its default policy ``none``: no NUMA hint narrows the choice.
    """

    name = POLICY_NAME

    def __init__(
        self,
        cpu_topology: CPUTopology,
        reserved: Iterable[int] = (),
        options: Mapping[str, str] | None = None,
        *,
        num_reserved: int | None = None,
        alpha_options_enabled: bool = False,
        beta_options_enabled: bool = True,
        topology_manager_policy: str = "none",
        require_reserved: bool = True,
    ):
        """``reserved``: reservedSystemCPUs. Without it, ``num_reserved`` CPUs (ceil of kube+system reserved)
        are taken by the same topology-aware selection, as NewStaticPolicy does.

        ``require_reserved``: refuse an empty reservation as the kubelet's cpu_manager.go does (the shared
        pool could otherwise run dry); False only to replay kubelet unit-test cases built with none.
        """
        try:
            self.options: StaticPolicyOptions = parse_options(
                options or {}, alpha_enabled=alpha_options_enabled, beta_enabled=beta_options_enabled
            )
            validate_options(self.options, cpu_topology, topology_manager_policy)
        except ValueError as e:
            raise PolicyError(str(e)) from None
        self.topology = cpu_topology
        self.cpu_group_size = cpu_topology.cpus_per_core
        reserved = frozenset(reserved)
        expected = len(reserved) if num_reserved is None else num_reserved
        if require_reserved and not reserved and not expected:
            raise PolicyError(
                "[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero"
            )
        if not reserved and expected:
            try:
                reserved = self.take_by_topology(cpu_topology.all_cpus, expected)
            except AllocationError:
                reserved = frozenset()
        if len(reserved) != expected:
            raise PolicyError(
                f"[cpumanager] unable to reserve the required amount of CPUs "
                f"(size of {format_cpulist(reserved)} did not equal {expected})"
            )
        physical: set[int] = set()
        for cpu in sorted(reserved):
            try:
                core = cpu_topology.core_of(cpu)
            except KeyError as e:
                raise PolicyError(
                    f"[cpumanager] unable to build the reserved physical CPUs from the reserved set: {e.args[0]}"
                ) from None
            physical |= cpu_topology.details.cpus_in_cores(core)
        self.reserved: CPUs = reserved
        self.reserved_physical: CPUs = frozenset(physical)

    # ---- pools ----
    def allocatable_cpus(self) -> CPUs:
        """GetAllocatableCPUs: every CPU minus the reserved ones."""
        return self.topology.all_cpus - self.reserved

    def available_cpus(self, state: CPUManagerState) -> CPUs:
        """GetAvailableCPUs: the shared pool minus the reserved CPUs."""
        return state.default_cpuset - self.reserved

    def initial_state(self) -> CPUManagerState:
        """The state ``validate_state`` builds from an empty checkpoint."""
        state = CPUManagerState(POLICY_NAME)
        self.validate_state(state)
        return state

    def validate_state(self, state: CPUManagerState, online_cpus: Iterable[int] | None = None) -> None:
        """validateState: initialise an empty state, else check it against the machine (raises StateValidationError).

        ``online_cpus`` defaults to the topology's CPUs (what the kubelet compares with).
        """
        all_cpus = self.topology.all_cpus if online_cpus is None else frozenset(online_cpus)
        if self.options.strict_cpu_reservation:
            all_cpus = all_cpus - self.reserved
        default = state.default_cpuset
        if not default:
            if state.entries:
                raise StateValidationError("default cpuset cannot be empty")
            state.default_cpuset = all_cpus
            return
        if self.options.strict_cpu_reservation:
            if self.reserved & default:
                raise StateValidationError(
                    f"some of strictly reserved cpus: {_q(self.reserved & default)} "
                    f"are present in defaultCpuSet: {_q(default)}"
                )
        elif not self.reserved <= default:
            raise StateValidationError(
                f"not all reserved cpus: {_q(self.reserved)} are present in defaultCpuSet: {_q(default)}"
            )
        for pod_uid, containers in state.entries.items():
            for container, cpus in containers.items():
                if cpus & default:
                    raise StateValidationError(
                        f"pod: {pod_uid}, container: {container} cpuset: {_q(cpus)} "
                        f"overlaps with default cpuset {_q(default)}"
                    )
        known = default | state.assigned()
        if known != all_cpus:
            raise StateValidationError(
                f"current set of available CPUs {_q(all_cpus)} doesn't match with CPUs in state {_q(known)}"
            )

    # ---- selection ----
    def take_by_topology(self, available: Iterable[int], num_cpus: int) -> CPUs:
        """The selection the options call for, over any available set (raises AllocationError)."""
        sorting = SPREAD if self.options.distribute_cpus_across_cores else PACKED
        if self.options.distribute_cpus_across_numa:
            group = self.cpu_group_size if self.options.full_pcpus_only else 1
            return take_by_topology_numa_distributed(self.topology, available, num_cpus, group, sorting)
        return take_by_topology_numa_packed(
            self.topology, available, num_cpus, sorting, self.options.prefer_align_by_uncore_cache
        )

    def smt_alignment_error(self, num_cpus: int, free_cpus: Iterable[int]) -> SMTAlignmentError | None:
        """enforceSMTAlignment: the error ``full-pcpus-only`` raises for this request, or None.

        ``free_cpus`` is the shared pool; siblings of reserved CPUs do not count as free physical CPUs.
        """
        if not self.options.full_pcpus_only:
            return None
        if num_cpus % self.cpu_group_size != 0:
            return SMTAlignmentError(num_cpus, self.cpu_group_size)
        physical = len(frozenset(free_cpus) - self.reserved_physical)
        if num_cpus > physical:
            return SMTAlignmentError(num_cpus, self.cpu_group_size, physical, caused_by_physical=True)
        return None

    def allocate_cpus(self, state: CPUManagerState, num_cpus: int, available: Iterable[int] | None = None) -> CPUs:
        """allocateCPUs: select from ``available`` (default: shared pool minus reserved) and remove the
        result from the state's shared pool. Records no assignment; raises AllocationError."""
        pool = self.available_cpus(state) if available is None else frozenset(available)
        result = self.take_by_topology(pool, num_cpus)
        state.default_cpuset = state.default_cpuset - result
        return result

    # ---- container lifecycle ----
    def allocate(self, state: CPUManagerState, pod: PodSpec, container: ContainerSpec) -> CPUs:
        """Allocate: the container's exclusive CPUs, or the shared pool for a container that gets none.

        Raises SMTAlignmentError or AllocationError and then leaves the state unchanged.
        """
        num_cpus = exclusive_cpus(pod, container)
        if num_cpus == 0:
            return state.default_cpuset
        error = self.smt_alignment_error(num_cpus, state.default_cpuset)
        if error is not None:
            raise error
        existing = state.get(pod.uid, container.name)
        if existing is not None:
            return existing
        result = self.allocate_cpus(state, num_cpus)
        state.set(pod.uid, container.name, result)
        return result

    def release(self, state: CPUManagerState, pod_uid: str, container: str) -> CPUs:
        """RemoveContainer: drop the assignment and give back the CPUs no other container of the pod holds."""
        cpus = state.get(pod_uid, container)
        if cpus is None:
            return frozenset()
        state.delete(pod_uid, container)
        in_use: set[int] = set()
        for other in state.entries.get(pod_uid, {}).values():
            in_use |= other
        released = cpus - in_use
        state.default_cpuset = state.default_cpuset | released
        return released
