"""The static policy: allocation cases ported from the kubelet's policy_static_test.go, SMT alignment,
strict reservation, validateState texts and option errors."""

from __future__ import annotations

import pytest

from cci_conformance.cpuset import format_cpulist, parse_cpulist
from cci_conformance.node.api import ContainerSpec, PodSpec
from cci_conformance.node.cpumanager import (
    AllocationError,
    CPUManagerState,
    PolicyError,
    SMTAlignmentError,
    StateValidationError,
    StaticPolicy,
)
from cci_conformance.node.cpumanager.topology import CPUInfo, build_cpu_topology


def topo_single_socket_ht():
    return build_cpu_topology({c: CPUInfo(0, 0, c % 4) for c in range(8)}, num_numa_nodes=0)


def topo_dual_socket_ht():
    return build_cpu_topology({c: CPUInfo(c % 2, c % 2, c % 6) for c in range(12)}, num_numa_nodes=0)


def topo_dual_socket_no_ht():
    return build_cpu_topology({c: CPUInfo(c // 4, c // 4, c) for c in range(8)})


def topo_multi_numa():
    """The kubelet's dual Xeon Gold 6230: 2 sockets, 4 NUMA nodes, 40 cores, SMT2."""
    return build_cpu_topology({c: CPUInfo((c % 40) // 10, (c % 40) // 20, c % 40) for c in range(80)})


TOPOS = {
    "SingleSocketHT": topo_single_socket_ht,
    "DualSocketHT": topo_dual_socket_ht,
    "DualSocketNoHT": topo_dual_socket_no_ht,
}


def make_pod(container: str, request: str, limit: str, uid: str = "fakePod") -> PodSpec:
    # makePod of the kubelet tests: cpu and memory ("1G") request/limit on one container.
    spec = ContainerSpec(name=container, cpu_request=request, cpu_limit=limit, memory_request="1G", memory_limit="1G")
    return PodSpec(namespace="default", name=uid, uid=uid, containers=(spec,))


def cpus(text):
    return parse_cpulist(text)


# (description, topo, numReservedCPUs, assignments, default, container, request, expected cpus or error)
ADD_CASES = [
    ("GuPodMultipleCores SingleSocketHT one core", "SingleSocketHT", 1, {"fakeContainer100": "2-3,6-7"}, "0-1,4-5",
     "fakeContainer3", "2000m", "1,5"),
    ("GuPodMultipleCores DualSocketHT one socket", "DualSocketHT", 1, {"fakeContainer100": "2"}, "0-1,3-11",
     "fakeContainer3", "6000m", "1,3,5,7,9,11"),
    ("GuPodMultipleCores DualSocketHT three cores", "DualSocketHT", 1, {"fakeContainer100": "1,5"}, "0,2-4,6-11",
     "fakeContainer3", "6000m", "2-4,8-10"),
    ("GuPodMultipleCores DualSocketNoHT one socket", "DualSocketNoHT", 1, {"fakeContainer100": ""}, "0-1,3-7",
     "fakeContainer1", "4000m", "4-7"),
    ("GuPodMultipleCores DualSocketNoHT four cores", "DualSocketNoHT", 1, {"fakeContainer100": "4-5"}, "0-1,3,6-7",
     "fakeContainer1", "4000m", "1,3,6-7"),
    ("GuPodMultipleCores DualSocketHT one socket one core", "DualSocketHT", 1, {"fakeContainer100": "2"},
     "0-1,3-11", "fakeContainer3", "8000m", "1,3-5,7,9-11"),
    ("GuPodSingleCore SingleSocketHT sibling of the partial core", "SingleSocketHT", 1, {}, "0-7",
     "fakeContainer2", "1000m", "4"),
    ("GuPodSingleCore SingleSocketHT too many", "SingleSocketHT", 1, {}, "0-7", "fakeContainer2", "8000m",
     AllocationError("not enough cpus available to satisfy request: requested=8, available=7")),
    ("GuPodMultipleCores SingleSocketHT same allocation", "SingleSocketHT", 1, {"fakeContainer3": "2-3,6-7"},
     "0-1,4-5", "fakeContainer3", "4000m", "2-3,6-7"),
    ("GuPodMultipleCores DualSocketHT too many", "DualSocketHT", 1, {"fakeContainer100": "1-3"}, "0,4-11",
     "fakeContainer5", "10000m",
     AllocationError("not enough cpus available to satisfy request: requested=10, available=8")),
]


@pytest.mark.parametrize("desc,topo,nres,assigned,default,container,cpu,expect", ADD_CASES,
                         ids=[c[0] for c in ADD_CASES])
def test_allocate_kubelet_cases(desc, topo, nres, assigned, default, container, cpu, expect):
    policy = StaticPolicy(TOPOS[topo](), num_reserved=nres)
    state = CPUManagerState("static", cpus(default), {"fakePod": {k: cpus(v) for k, v in assigned.items()}})
    before = state.copy()
    pod = make_pod(container, cpu, cpu)
    if isinstance(expect, Exception):
        with pytest.raises(type(expect)) as e:
            policy.allocate(state, pod, pod.containers[0])
        assert str(e.value) == str(expect)
        assert state == before
        return
    got = policy.allocate(state, pod, pod.containers[0])
    assert format_cpulist(got) == expect
    assert state.get("fakePod", container) == got
    assert not got & state.default_cpuset


def test_shared_pool_containers_get_the_default_set():
    policy = StaticPolicy(topo_single_socket_ht(), num_reserved=1)
    state = policy.initial_state()
    for request, limit in (("1000m", "2000m"), ("977m", "977m")):  # Burstable; Guaranteed non-integer
        pod = make_pod("c", request, limit)
        assert policy.allocate(state, pod, pod.containers[0]) == cpus("0-7")
    assert state.entries == {}


def test_reserved_by_count_is_topology_aware():
    assert StaticPolicy(topo_single_socket_ht(), num_reserved=2).reserved == cpus("0,4")
    assert StaticPolicy(topo_dual_socket_ht(), num_reserved=2).reserved == cpus("0,6")


# ---- full-pcpus-only ----
def test_smt_alignment_request_not_multiple_of_threads_per_core():
    policy = StaticPolicy(topo_dual_socket_ht(), reserved={0}, options={"full-pcpus-only": "true"})
    state = policy.initial_state()
    pod = make_pod("c", "1", "1")
    with pytest.raises(SMTAlignmentError) as e:
        policy.allocate(state, pod, pod.containers[0])
    assert str(e.value) == "SMT Alignment Error: requested 1 cpus not multiple cpus per core = 2"
    assert e.value.type == "SMTAlignmentError"
    assert state == policy.initial_state()


def test_smt_alignment_counts_siblings_of_reserved_cpus_as_unavailable():
    # policy_static_test.go "GuPodManyCores, topoDualSocketHT, ExpectDoNotAllocPartialCPU".
    policy = StaticPolicy(topo_dual_socket_ht(), reserved=cpus("1,6"), options={"full-pcpus-only": "true"})
    state = CPUManagerState("static", cpus("0,2-5,7-11"))
    pod = make_pod("fakeContainerBug113537_1", "10000m", "10000m")
    with pytest.raises(SMTAlignmentError) as e:
        policy.allocate(state, pod, pod.containers[0])
    assert str(e.value) == (
        "SMT Alignment Error: not enough free physical CPUs: available physical CPUs = 8, requested CPUs = 10, "
        "CPUs per core = 2"
    )
    assert policy.reserved_physical == cpus("0-1,6-7")


def test_smt_alignment_auto_reserve_allocates_all_free_cpus():
    # "GuPodManyCores, topoDualSocketHT, AutoReserve, ExpectAllocAllCPUs".
    policy = StaticPolicy(topo_dual_socket_ht(), num_reserved=2, options={"full-pcpus-only": "true"})
    state = CPUManagerState("static", cpus("1-5,7-11"))
    pod = make_pod("fakeContainerBug113537_2", "10000m", "10000m")
    assert policy.allocate(state, pod, pod.containers[0]) == cpus("1-5,7-11")


def test_full_pcpus_only_gives_whole_cores():
    policy = StaticPolicy(topo_dual_socket_ht(), reserved=cpus("0"), options={"full-pcpus-only": "true"})
    state = policy.initial_state()
    for i in range(5):
        pod = make_pod(f"c{i}", "2", "2", uid=f"pod-{i}")
        got = policy.allocate(state, pod, pod.containers[0])
        assert len({c % 6 for c in got}) == 1  # one core: c and c+6 are siblings
    pod = make_pod("last", "2", "2", uid="pod-last")
    with pytest.raises(SMTAlignmentError, match="available physical CPUs = 0"):
        policy.allocate(state, pod, pod.containers[0])


# ---- strict reservation ----
def test_strict_reservation_keeps_reserved_cpus_out_of_the_shared_pool():
    policy = StaticPolicy(topo_dual_socket_ht(), reserved=cpus("0,6"), options={"strict-cpu-reservation": "true"})
    state = policy.initial_state()
    assert state.default_cpuset == cpus("1-5,7-11")
    pod = make_pod("c", "4", "4")
    got = policy.allocate(state, pod, pod.containers[0])
    assert not got & cpus("0,6")
    policy.release(state, pod.uid, "c")
    assert state.default_cpuset == cpus("1-5,7-11")
    policy.validate_state(state)


def test_without_strict_reservation_reserved_cpus_stay_shared_but_never_exclusive():
    policy = StaticPolicy(topo_dual_socket_ht(), reserved=cpus("0,6"))
    state = policy.initial_state()
    assert state.default_cpuset == cpus("0-11")
    pod = make_pod("c", "10", "10")
    assert policy.allocate(state, pod, pod.containers[0]) == cpus("1-5,7-11")
    assert state.default_cpuset == cpus("0,6")


def test_release_returns_cpus_and_drops_empty_pods():
    policy = StaticPolicy(topo_dual_socket_ht(), num_reserved=1)
    state = policy.initial_state()
    pod = make_pod("c", "3", "3")
    got = policy.allocate(state, pod, pod.containers[0])
    assert policy.release(state, pod.uid, "c") == got
    assert state.entries == {} and state.default_cpuset == cpus("0-11")
    assert policy.release(state, pod.uid, "c") == frozenset()


def test_distribute_across_numa_with_full_pcpus_uses_core_sized_groups():
    both = {"distribute-cpus-across-numa": "true", "full-pcpus-only": "true"}
    policy = StaticPolicy(topo_multi_numa(), options=both, require_reserved=False)
    state = policy.initial_state()
    pod = make_pod("c", "26", "26")
    assert format_cpulist(policy.allocate(state, pod, pod.containers[0])) == "0-6,10-15,40-46,50-55"
    plain = StaticPolicy(topo_multi_numa(), options={"distribute-cpus-across-numa": "true"}, require_reserved=False)
    state = plain.initial_state()
    assert format_cpulist(plain.allocate(state, pod, pod.containers[0])) == "0-6,10-16,40-45,50-55"


def test_allocate_cpus_on_a_caller_supplied_available_set():
    policy = StaticPolicy(topo_dual_socket_ht(), num_reserved=1)
    state = policy.initial_state()
    got = policy.allocate_cpus(state, 2, available=cpus("1,3,7,9"))
    assert got == cpus("1,7")
    assert state.default_cpuset == cpus("0,2-6,8-11")
    assert state.entries == {}


# ---- validateState (TestStaticPolicyStart) ----
START_CASES = [
    ("reserved 0,6 missing from default", 2, {}, {}, "0-1",
     'not all reserved cpus: "0,6" are present in defaultCpuSet: "0-1"'),
    ("strict: reserved present in default", 2, {"strict-cpu-reservation": "true"}, {}, "0-1",
     'some of strictly reserved cpus: "0" are present in defaultCpuSet: "0-1"'),
    ("assigned cpu 2 still in default", 0, {}, {"0": "0-2"}, "2-11",
     'pod: fakePod, container: 0 cpuset: "0-2" overlaps with default cpuset "2-11"'),
    ("strict: assigned cpu 2 still in default", 0, {"strict-cpu-reservation": "true"}, {"0": "0-2"}, "2-11",
     'pod: fakePod, container: 0 cpuset: "0-2" overlaps with default cpuset "2-11"'),
    ("cpu 12 not in topology", 0, {}, {"0": "0-2", "1": "3-4"}, "5-12",
     'current set of available CPUs "0-11" doesn\'t match with CPUs in state "0-12"'),
    ("cpu 11 missing from state", 0, {}, {"0": "0-2", "1": "3-4"}, "5-10",
     'current set of available CPUs "0-11" doesn\'t match with CPUs in state "0-10"'),
    ("empty default with assignments", 0, {}, {"0": "0-2"}, "", "default cpuset cannot be empty"),
]


@pytest.mark.parametrize("desc,nres,options,assigned,default,err", START_CASES, ids=[c[0] for c in START_CASES])
def test_validate_state_errors(desc, nres, options, assigned, default, err):
    policy = StaticPolicy(topo_dual_socket_ht(), num_reserved=nres, options=options, require_reserved=False)
    entries = {"fakePod": {k: cpus(v) for k, v in assigned.items()}} if assigned else {}
    with pytest.raises(StateValidationError) as e:
        policy.validate_state(CPUManagerState("static", cpus(default), entries))
    assert str(e.value) == err


def test_validate_state_accepts_good_states_and_initialises_empty_ones():
    policy = StaticPolicy(topo_dual_socket_ht(), require_reserved=False)
    policy.validate_state(CPUManagerState("static", cpus("1-11"), {"fakePod": {"0": cpus("0")}}), online_cpus=range(12))
    empty = CPUManagerState("static")
    policy.validate_state(empty)
    assert empty.default_cpuset == cpus("0-11")
    with pytest.raises(StateValidationError, match="doesn't match"):
        policy.validate_state(CPUManagerState("static", cpus("0-11")), online_cpus=range(10))


# ---- options and reserved CPUs refused at construction ----
@pytest.mark.parametrize(
    "options,kwargs,err",
    [
        ({"foo": "true"}, {}, 'unknown CPU Manager Policy option: "foo"'),
        ({"align-by-socket": "true"}, {}, 'CPU Manager Policy Alpha-level Options not enabled, but option '
                                           '"align-by-socket" provided'),
        ({"strict-cpu-reservation": "true"}, {"beta_options_enabled": False},
         'CPU Manager Policy Beta-level Options not enabled, but option "strict-cpu-reservation" provided'),
        ({"full-pcpus-only": "yes"}, {}, 'bad value for option "full-pcpus-only": strconv.ParseBool: parsing "yes": '
                                         'invalid syntax'),
        ({"full-pcpus-only": "true", "distribute-cpus-across-cores": "true"}, {"alpha_options_enabled": True},
         "static policy options full-pcpus-only and distribute-cpus-across-cores can not be used at the same time"),
        ({"prefer-align-cpus-by-uncorecache": "true", "distribute-cpus-across-numa": "True"}, {},
         "static policy options prefer-align-cpus-by-uncorecache and distribute-cpus-across-numa can not be used "
         "at the same time"),
    ],
)
def test_bad_options_are_refused_like_the_kubelet(options, kwargs, err):
    with pytest.raises(PolicyError) as e:
        StaticPolicy(topo_dual_socket_ht(), reserved={0}, options=options, **kwargs)
    assert str(e.value) == err


def test_align_by_socket_needs_as_many_numa_nodes_as_sockets():
    topo = build_cpu_topology({c: CPUInfo(0, c // 4, c) for c in range(8)})  # 2 sockets, 1 NUMA node
    with pytest.raises(PolicyError, match="Align by socket is not compatible"):
        StaticPolicy(topo, reserved={0}, options={"align-by-socket": "true"}, alpha_options_enabled=True)


def test_reserved_cpus_must_exist_and_count_must_be_met():
    with pytest.raises(PolicyError) as e:
        StaticPolicy(topo_dual_socket_ht(), reserved=cpus("3,99"))
    assert str(e.value) == (
        "[cpumanager] unable to build the reserved physical CPUs from the reserved set: unknown CPU ID: 99"
    )
    with pytest.raises(PolicyError) as e:
        StaticPolicy(topo_dual_socket_ht())
    assert str(e.value) == (
        "[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero"
    )
    with pytest.raises(PolicyError) as e:
        StaticPolicy(topo_dual_socket_ht(), num_reserved=13)
    assert str(e.value) == "[cpumanager] unable to reserve the required amount of CPUs (size of  did not equal 13)"


def test_full_pcpus_with_distribute_across_numa_can_split_cores_when_reserved_cpus_do():
    # Pinned kubelet behaviour: the SMT check only counts free whole cores; the distributed path then
    # selects from "shared pool minus reserved", which still holds the siblings (6, 8) of reserved 0 and 2.
    options = {"full-pcpus-only": "true", "distribute-cpus-across-numa": "true"}
    policy = StaticPolicy(topo_dual_socket_ht(), reserved=cpus("0,2"), options=options)
    state = policy.initial_state()
    first, second = make_pod("a", "2", "2", uid="p0"), make_pod("b", "4", "4", uid="p1")
    assert policy.allocate(state, first, first.containers[0]) == cpus("1,7")
    assert policy.allocate(state, second, second.containers[0]) == cpus("4,6,8,10")
