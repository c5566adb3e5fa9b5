"""Property: random allocate/release sequences keep the static policy's accounting invariants."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cci_conformance.node.api import ContainerSpec, PodSpec
from cci_conformance.node.cpumanager import (
    AllocationError,
    CPUManagerState,
    SMTAlignmentError,
    StateValidationError,
    StaticPolicy,
    dumps,
    loads,
)
from cci_conformance.node.cpumanager.topology import CPUInfo, build_cpu_topology


def snc_like():
    """2 sockets x 2 NUMA nodes x 3 cores x SMT2 (24 CPUs): more NUMA nodes than sockets."""
    return build_cpu_topology({c: CPUInfo((c % 12) // 3, (c % 12) // 6, c % 12) for c in range(24)})


def dual_socket_ht():
    return build_cpu_topology({c: CPUInfo(c % 2, c % 2, c % 6) for c in range(12)})


TOPOLOGIES = {"snc": snc_like(), "dual": dual_socket_ht()}

OPTION_SETS = [
    {},
    {"full-pcpus-only": "true"},
    {"strict-cpu-reservation": "true"},
    {"distribute-cpus-across-numa": "true"},
    {"full-pcpus-only": "true", "strict-cpu-reservation": "true", "distribute-cpus-across-numa": "true"},
]

operation = st.one_of(
    st.tuples(st.just("alloc"), st.integers(0, 7), st.sampled_from(["0", "1", "2", "3", "4", "6", "500m", "1500m"])),
    st.tuples(st.just("release"), st.integers(0, 7), st.just("")),
)


def check_invariants(policy: StaticPolicy, state: CPUManagerState, online: frozenset[int]) -> None:
    held = [cpus for pod in state.entries.values() for cpus in pod.values()]
    union: set[int] = set()
    for cpus in held:
        assert not cpus & union, "two containers hold the same exclusive CPU"
        union |= cpus
    assert not union & state.default_cpuset, "an exclusive CPU is still in the shared pool"
    expected_total = online - policy.reserved if policy.options.strict_cpu_reservation else online
    assert union | state.default_cpuset == expected_total, "a CPU was lost or invented"
    assert not union & policy.reserved, "a reserved CPU was handed out exclusively"
    # full-pcpus-only guarantees whole cores, except (as in the kubelet) with distribute-cpus-across-numa when
    # reserved CPUs split a core: that path picks per NUMA node from "default minus reserved", which still
    # holds the reserved CPUs' siblings, and only the count is checked against whole cores.
    whole_cores = not policy.options.distribute_cpus_across_numa or policy.reserved == policy.reserved_physical
    if policy.options.full_pcpus_only and whole_cores:
        for cpus in held:
            for cpu in cpus:
                assert policy.topology.details.cpus_in_cores(policy.topology.core_of(cpu)) <= cpus
    if not state.default_cpuset and state.entries:
        # Only strict reservation can drain the shared pool; the kubelet then refuses to restart.
        assert policy.options.strict_cpu_reservation
        with pytest.raises(StateValidationError, match="^default cpuset cannot be empty$"):
            policy.validate_state(state.copy(), online_cpus=online)
    else:
        policy.validate_state(state.copy(), online_cpus=online)
    assert loads(dumps(state), policy_name="static") == state


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    topo_name=st.sampled_from(sorted(TOPOLOGIES)),
    options=st.sampled_from(OPTION_SETS),
    reserved_mask=st.integers(1, 15),  # the kubelet refuses a static policy without reserved CPUs
    ops=st.lists(operation, max_size=25),
)
def test_random_sequences_keep_the_invariants(topo_name, options, reserved_mask, ops):
    topo = TOPOLOGIES[topo_name]
    reserved = frozenset(c for c in range(4) if reserved_mask >> c & 1)
    policy = StaticPolicy(topo, reserved=reserved, options=options)
    state = policy.initial_state()
    online = topo.all_cpus
    live: dict[int, int] = {}  # pod index -> CPUs it was granted
    for kind, index, cpu in ops:
        uid = f"pod-{index}"
        if kind == "release":
            policy.release(state, uid, "app")
            live.pop(index, None)
        else:
            pod = PodSpec("ns", uid, uid, (ContainerSpec("app", cpu_limit=cpu, memory_limit="1Gi"),))
            before = state.copy()
            try:
                got = policy.allocate(state, pod, pod.containers[0])
            except (AllocationError, SMTAlignmentError):
                assert state == before, "a refused allocation changed the state"
                continue
            granted = state.get(uid, "app")
            if granted is None:
                assert got == state.default_cpuset  # shared-pool container
            elif index in live:
                assert len(granted) == live[index]  # idempotent: the first grant stands
            else:
                assert got == granted and len(granted) == int(cpu)
                live[index] = len(granted)
        check_invariants(policy, state, online)
