"""Accounting: static-QoS pods, CCI grants, reserved CPUs and the shared pool kept in one ledger (docs/spec.md §3)."""

from __future__ import annotations

import pytest
from claimkit import available_now, claim_pod, exclusive, fmt, node_problems, shared, standard_pod, static_pod

from cci_conformance.certify.outcomes import not_applicable
from cci_conformance.cpu_manager_state import loads


def need_static(node_config) -> None:
    if node_config.policy != "static":
        not_applicable("the node profile has no static CPU manager (alpha mode): no static-QoS pods to account")


def denied_siblings(topology, driver_manifest) -> tuple[str, ...]:
    """CORE-SIBLING-DENIED where it withholds something and the driver declared it (S1.11: never beyond the base)."""
    return ("CORE-SIBLING-DENIED",) if topology.threads_per_core > 1 and driver_manifest.has("core-siblings") else ()


def mixed_load(pods, topology, denied: tuple[str, ...], statics_first: bool = False) -> list:
    """Static, CCI exclusive (with and without withheld siblings), CCI shared and standard pods, interleaved.

    Sized to about half of the machine's free CPUs, so a laptop-sized machine gets the same shapes."""
    small = len(available_now(pods.session.snapshot())) < 16
    claims = [standard_pod(), claim_pod(shared(1 if small else 4)), claim_pod(exclusive(1 if small else 3)),
              claim_pod(exclusive(2, *denied))]
    statics = [static_pod(1 if small else 2), static_pod(1)] + ([] if small else [static_pod(3)]) + [standard_pod()]
    # Static pods after the claims here; ACCT-001/003 test claims placed after static pods on purpose.
    results = [pods.create(p) for p in (statics + claims if statics_first else claims + statics)]
    refused = [r for r in results if not r.admitted]
    assert not refused, f"{len(refused)} pods of a light load refused: {refused[0].reason}: {refused[0].message}"
    return results


@pytest.mark.requirement("ACCT-001")
def test_static_and_cci_grants_never_overlap(node, pods, topology, node_config, driver_manifest):
    """No CPU MUST be counted twice: static grants, CCI grants and withheld siblings are pairwise disjoint."""
    need_static(node_config)
    mixed_load(pods, topology, denied_siblings(topology, driver_manifest), statics_first=True)
    if denied_siblings(topology, driver_manifest):
        half_held_core_then_denied(node, pods, topology)
    snap = node.snapshot()
    owner: dict[int, str] = {}
    for key, cpus in snap.exclusive.items():
        for cpu in cpus:
            assert cpu not in owner, f"CPU {cpu} is held by {owner[cpu]} and {key}"
            owner[cpu] = key
    assert not node_problems(node), node_problems(node)


def half_held_core_then_denied(node, pods, topology) -> None:
    """Put a static pod on one thread of a core the driver was offered whole, then claim DENIED siblings.

    A DENIED group withholds the siblings of its threads (S2.4); taking the free thread of that core
    would withhold the static pod's CPU too, counting it twice. The node refuses such a reply
    (InvalidDriverReply); a driver may still refuse the claim itself for lack of room."""
    if len(available_now(node.snapshot())) < 8:  # a small machine already full of the mixed load
        return
    pods.create(claim_pod(shared(1)))  # the driver is offered every available CPU
    for _ in range(3):  # the kubelet fills half-used cores first; a fresh core is split within three pods
        static = pods.create(static_pod(1))
        if not static.admitted:  # no room left for a static pod: the case cannot be set up here
            return
        mine = static.containers[0].cpus
        free = available_now(node.snapshot())
        if any(core & mine and core & free for core in topology.cores):
            break
    else:
        return
    result = pods.create(claim_pod(exclusive(2, "CORE-SIBLING-DENIED")))
    assert result.admitted or result.reason == "CCIAdmitError", f"{result.reason}: {result.message}"


@pytest.mark.requirement("ACCT-002")
def test_reserved_cpus_are_never_granted(node, pods, topology):
    """Reserved CPUs MUST never be in availableCpus, in a grant, or in a container's exclusive cpuset."""
    snap = node.snapshot()
    if not snap.reserved:
        not_applicable("the node profile reserves no CPUs")
    room = len(available_now(snap))
    for parameters in (shared(room), exclusive(room)):
        result = pods.create(claim_pod(parameters))
        assert result.admitted, f"{result.reason}: {result.message}"
        assert not result.containers[0].cpus & snap.reserved, "a grant holds reserved CPUs"
        pods.delete(result.containers[0].pod_uid)


@pytest.mark.requirement("ACCT-003")
def test_cci_never_grants_cpus_of_static_pods(node, pods, node_config):
    """CPUs held by a static-QoS container MUST never be granted by CCI while it lives."""
    need_static(node_config)
    statics = [pods.create(static_pod(n)) for n in (2, 1, 2)]
    assert all(r.admitted for r in statics)
    static_cpus = frozenset().union(*(r.containers[0].cpus for r in statics))
    room = len(available_now(node.snapshot()))
    for parameters in (exclusive(room), shared(room)):
        result = pods.create(claim_pod(parameters))
        assert result.admitted, f"{result.reason}: {result.message}"
        assert not result.containers[0].cpus & static_cpus, f"CCI granted static CPUs {fmt(static_cpus)}"
        pods.delete(result.containers[0].pod_uid)


@pytest.mark.requirement("ACCT-004")
def test_shared_pool_is_the_online_cpus_minus_every_held_cpu(node, pods, topology, node_config, driver_manifest):
    """The shared pool MUST equal the online CPUs minus every held CPU (minus reserved under strict reservation)."""
    denied = denied_siblings(topology, driver_manifest)
    small = len(available_now(node.snapshot())) < 16
    for pod in (claim_pod(exclusive(1 if small else 2)), claim_pod(exclusive(2, *denied))):
        assert pods.create(pod).admitted
    if node_config.policy == "static":
        assert pods.create(static_pod(2)).admitted
    snap = node.snapshot()
    held = frozenset().union(*snap.exclusive.values())
    strict = node_config.strict_reservation
    want = snap.online - held - (snap.reserved if strict else frozenset())
    assert snap.shared_pool == want, f"shared pool {fmt(snap.shared_pool)}, expected {fmt(want)}"


@pytest.mark.requirement("ACCT-005")
def test_standard_containers_shrink_and_grow_with_exclusive_grants(node, pods):
    """Standard containers MUST lose the CPUs of a new exclusive grant and get them back when it is removed."""
    std = pods.create(standard_pod()).containers[0]
    key = (std.pod_uid, std.container)

    def runtime_cpus():
        return next(c.runtime_cpus for c in node.snapshot().containers if (c.pod_uid, c.container) == key)

    before = runtime_cpus()
    result = pods.create(claim_pod(exclusive(4)))
    grant = result.containers[0].cpus
    assert not runtime_cpus() & grant, "a standard container still runs on freshly granted exclusive CPUs"
    pods.delete(result.containers[0].pod_uid)
    assert runtime_cpus() == before, "the standard container did not get the released CPUs back"


@pytest.mark.requirement("ACCT-006")
def test_allocatable_cpus_are_online_minus_reserved(node, pods):
    """Pod-resources GetAllocatableResources MUST report the online CPUs minus the reserved ones, whatever is held."""
    snap = node.snapshot()
    assert node.allocatable_cpus() == snap.online - snap.reserved
    pods.create(claim_pod(exclusive(2)))
    assert node.allocatable_cpus() == snap.online - snap.reserved


@pytest.mark.requirement("ACCT-007")
def test_pod_resources_list_reports_every_held_cpu(node, pods, topology, node_config, driver_manifest):
    """Pod-resources List MUST give each container exactly the CPUs it holds (static, CCI exclusive, withheld)."""
    if node_config.policy == "static":
        mixed_load(pods, topology, denied_siblings(topology, driver_manifest))
    else:
        pods.create(claim_pod(exclusive(3)))
    snap = node.snapshot()
    names = {f"{c.pod_uid}/{c.container}": f"{c.namespace}/{c.pod_name}/{c.container}" for c in snap.containers}
    want = {names[k]: v for k, v in snap.exclusive.items()}
    assert node.listed_exclusive_cpus() == want


@pytest.mark.requirement("ACCT-008")
def test_runtime_cpusets_follow_the_store(node, pods, topology, node_config, driver_manifest):
    """The cpuset the runtime applied to every container MUST equal the node's assignment after each change."""
    denied = denied_siblings(topology, driver_manifest)
    results = mixed_load(pods, topology, denied) if node_config.policy == "static" else \
        [pods.create(claim_pod(exclusive(3))), pods.create(standard_pod())]
    for r in results[::2]:
        pods.delete(r.containers[0].pod_uid)
        wrong = [c for c in node.snapshot().containers if c.running and c.runtime_cpus != c.store_cpus]
        assert not wrong, f"{wrong[0].pod_uid}/{wrong[0].container}: runtime {fmt(wrong[0].runtime_cpus)}"


@pytest.mark.requirement("ACCT-009")
def test_cpu_manager_state_is_a_valid_kubelet_checkpoint(node, pods, topology, node_config, driver_manifest):
    """cpu_manager_state MUST stay a kubelet v2 checkpoint (checksum, entries, defaultCpuSet) matching the store."""
    need_static(node_config)
    mixed_load(pods, topology, denied_siblings(topology, driver_manifest))
    snap = node.snapshot()
    state = loads(node.persisted_state().cpu_manager_state, policy_name="static")  # verifies the checksum
    entries = {f"{pod}/{name}": cpus for pod, cs in state.entries.items() for name, cpus in cs.items()}
    assert entries == snap.exclusive and state.default_cpuset == snap.shared_pool
