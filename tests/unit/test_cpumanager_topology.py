"""The kubelet's CPUTopology derived from our Topology model, and allocations on hand-built machines."""

from __future__ import annotations

from cci_conformance.cpuset import format_cpulist, parse_cpulist
from cci_conformance.node.cpumanager.assignment import take_by_topology_numa_packed
from cci_conformance.node.cpumanager.topology import CPUInfo, from_model
from cci_conformance.topology.model import CPU, Cache, NumaNode, Topology


def machine(sockets, numa_per_socket, cores_per_numa, threads, *, l3="socket", empty_nodes=0, name="m"):
    """Linux-style numbering: first threads of every core get 0..N-1, the siblings N..2N-1, and so on.

    ``l3``: "socket" (one L3 per package), "numa" (one per NUMA node), or an int (cores per L3).
    """
    cores = sockets * numa_per_socket * cores_per_numa
    cpus = []
    for t in range(threads):
        for core in range(cores):
            numa = core // cores_per_numa
            socket = numa // numa_per_socket
            cpus.append(CPU(id=t * cores + core, package=socket, die=0, core=core % (numa_per_socket * cores_per_numa),
                            node=numa))
    nnodes = sockets * numa_per_socket
    nodes = [
        NumaNode(id=n, cpus=frozenset(c.id for c in cpus if c.node == n), memory_kb=1 << 20,
                 distances=tuple(10 if i == n else 20 for i in range(nnodes + empty_nodes)))
        for n in range(nnodes)
    ]
    nodes += [NumaNode(id=nnodes + i, cpus=frozenset(), memory_kb=1 << 20,
                       distances=tuple(10 if j == nnodes + i else 20 for j in range(nnodes + empty_nodes)))
              for i in range(empty_nodes)]
    if l3 == "socket":
        key = lambda c: c.package  # noqa: E731
    elif l3 == "numa":
        key = lambda c: c.node  # noqa: E731
    else:
        key = lambda c: (c.id % cores) // l3  # noqa: E731
    groups: dict[int, set[int]] = {}
    for c in cpus:
        groups.setdefault(key(c), set()).add(c.id)
    caches = tuple(Cache(level=3, type="Unified", id=i, size_kb=32768, cpus=frozenset(g)) for i, g in groups.items())
    return Topology(name=name, cpus=tuple(sorted(cpus)), nodes=tuple(nodes), caches=caches)


def test_dual_socket_two_numa_per_socket_matches_the_kubelet_fixture():
    # Dual Xeon Gold 6230 (the kubelet's topoDualSocketMultiNumaPerSocketHT): 80 CPUs, 4 NUMA nodes.
    topo = from_model(machine(2, 2, 10, 2))
    assert (topo.num_cpus, topo.num_cores, topo.num_sockets, topo.num_numa_nodes) == (80, 40, 2, 4)
    for c in range(80):
        info = topo.details[c]
        assert (info.numa_node, info.socket, info.core) == ((c % 40) // 10, (c % 40) // 20, c % 40)
    # The L3 spans a socket (40 CPUs), not a node (20): cAdvisor lists it as an uncore cache.
    assert {topo.details[c].uncore_cache for c in range(80)} == {0, 1}
    assert topo.cpus_per_core == 2 and topo.cpus_per_socket == 40
    got = take_by_topology_numa_packed(topo, parse_cpulist("1-39,41-79"), 60)
    assert format_cpulist(got) == "10-39,50-79"


def test_snc4_like_machine_takes_sockets_first_then_numa_nodes():
    # 2 sockets x 4 NUMA nodes (sub-NUMA clustering) x 4 cores x SMT2 = 64 CPUs. More NUMA nodes
    # than sockets, so whole sockets are taken first, then whole NUMA nodes, by best fit.
    topo = from_model(machine(2, 4, 4, 2))
    assert (topo.num_cpus, topo.num_cores, topo.num_sockets, topo.num_numa_nodes) == (64, 32, 2, 8)
    assert topo.details[33] == CPUInfo(numa_node=0, socket=0, core=1, uncore_cache=0)
    assert format_cpulist(take_by_topology_numa_packed(topo, topo.all_cpus, 8)) == "0-3,32-35"
    assert format_cpulist(take_by_topology_numa_packed(topo, topo.all_cpus, 40)) == "0-19,32-51"
    # CPU 0 busy: NUMA 0 is no longer whole; socket 0 has fewer free CPUs so it is preferred (best fit).
    assert format_cpulist(take_by_topology_numa_packed(topo, topo.all_cpus - {0}, 8)) == "4-7,36-39"
    # 2 CPUs with CPU 0 busy: the partly used core's sibling is not a whole core, so a whole core of
    # the fullest NUMA node (NUMA 0) goes first.
    assert format_cpulist(take_by_topology_numa_packed(topo, topo.all_cpus - {0}, 2)) == "1,33"
    assert format_cpulist(take_by_topology_numa_packed(topo, topo.all_cpus - {0}, 1)) == "32"


def test_uncore_cache_is_the_socket_when_the_l3_covers_exactly_a_node():
    topo = from_model(machine(2, 1, 8, 2, l3="socket"))
    assert {c: topo.details[c].uncore_cache for c in (0, 8, 16, 24)} == {0: 0, 8: 1, 16: 0, 24: 1}
    assert topo.num_uncore_caches == 2


def test_uncore_cache_ids_come_from_split_l3():
    # AMD-like: one node, an L3 per 4 cores.
    topo = from_model(machine(1, 1, 16, 2, l3=4))
    assert topo.num_uncore_caches == 4
    assert [topo.details[c].uncore_cache for c in (0, 4, 8, 12, 16, 31)] == [0, 1, 2, 3, 0, 3]
    assert topo.cpus_per_uncore == 8
    got = take_by_topology_numa_packed(topo, topo.all_cpus - {0, 16}, 8, prefer_align_by_uncore_cache=True)
    assert format_cpulist(got) == "4-7,20-23"


def test_cpu_less_nodes_are_not_counted():
    topo = from_model(machine(1, 2, 2, 1, l3="numa", empty_nodes=2))
    assert topo.num_numa_nodes == 2
    assert topo.num_cores == 4 and topo.cpus_per_core == 1


def test_core_id_is_the_lowest_thread_even_when_sysfs_core_ids_repeat_across_sockets():
    topo = from_model(machine(2, 1, 4, 2))
    # sysfs core_id 0 exists on both sockets; the kubelet's CoreID is unique: 0 and 4.
    assert topo.details[8].core == 0 and topo.details[12].core == 4
    assert topo.details.cpus_in_cores(4) == frozenset({4, 12})


def test_hybrid_machine_counts_cores_and_divides_like_the_kubelet():
    cpus = [CPU(id=i, package=0, die=0, core=i % 4, node=0) for i in range(8)]  # 4 P-cores x 2
    cpus += [CPU(id=8 + i, package=0, die=0, core=10 + i, node=0) for i in range(4)]  # 4 E-cores x 1
    node = NumaNode(id=0, cpus=frozenset(range(12)), memory_kb=1, distances=(10,))
    l3 = Cache(level=3, type="Unified", id=7, size_kb=12288, cpus=frozenset(range(12)))
    topo = from_model(Topology(name="hybrid", cpus=tuple(cpus), nodes=(node,), caches=(l3,)))
    assert (topo.num_cpus, topo.num_cores) == (12, 8)
    assert topo.cpus_per_core == 1  # 12 // 8, as CPUsPerCore computes it
    # cAdvisor compares the L3 with "cores in node x threads of this core" (16 for a P-core, 8 for an
    # E-core), never 12, so the whole-node L3 becomes an uncore cache on a hybrid part.
    assert {topo.details[c].uncore_cache for c in range(12)} == {7}
