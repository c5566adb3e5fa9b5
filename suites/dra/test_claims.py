"""Claim semantics: exact count, disjoint claims, whole cores first, selectors, one claim shared inside a pod."""

from __future__ import annotations

import pytest

from cci_conformance.certify.outcomes import not_applicable
from cci_conformance.dra.api import ClaimSpec, ContainerSpec, PodSpec
from cci_conformance.dra.checks import (
    claim_cpus,
    creates,
    current_cpus,
    fmt,
    need_offered,
    overlaps_over_time,
    split_cores,
)


@pytest.mark.requirement("CLAIM-601")
def test_claimed_container_runs_on_exactly_its_allocation(dra):
    """A container consuming an exclusive CPU claim MUST run on exactly the CPUs allocated to it, as many as asked."""
    count = dra.topology.threads_per_core
    need_offered(dra, count)
    pod = dra.create_pod(PodSpec.claimed("cl-exact", count))
    allocated = claim_cpus(dra, pod)
    (first,) = creates(dra.cpuset_records(), "cl-exact", "c0")[:1] or [None]
    assert len(allocated) == count, f"claim for {count} CPUs was allocated {fmt(allocated)}"
    assert first is not None, "the runtime recorded no create of cl-exact/c0"
    assert first.cpus == allocated, f"cl-exact/c0 was created on {fmt(first.cpus)}, its claim holds {fmt(allocated)}"


@pytest.mark.requirement("CLAIM-602")
def test_claims_stay_disjoint_at_every_create_and_update(dra):
    """Two exclusive claims MUST never share a CPU, at any create or update the runtime is asked for."""
    count = dra.topology.threads_per_core
    need_offered(dra, 2 * count)
    start = len(dra.cpuset_records())
    a = dra.create_pod(PodSpec.claimed("cl-a", count))
    b = dra.create_pod(PodSpec.claimed("cl-b", count))
    cpus_a, cpus_b = claim_cpus(dra, a), claim_cpus(dra, b)
    records = dra.cpuset_records()[start:]
    owners = {("cl-a", "c0"): cpus_a, ("cl-b", "c0"): cpus_b}
    problems = overlaps_over_time(records, owners, among=set(owners))
    assert not cpus_a & cpus_b, f"cl-a {fmt(cpus_a)} and cl-b {fmt(cpus_b)} share {fmt(cpus_a & cpus_b)}"
    assert not problems, "; ".join(problems)


@pytest.mark.requirement("CLAIM-603")
def test_claim_of_a_core_gets_one_whole_core(dra):
    """A claim for as many CPUs as a core has threads MUST get one whole core when a whole core is free."""
    count = dra.topology.threads_per_core
    if count < 2:
        not_applicable(f"{dra.topology.name} has one thread per core: every claim is whole cores")
    need_offered(dra, count)
    pod = dra.create_pod(PodSpec.claimed("cl-core", count))
    cpus = claim_cpus(dra, pod)
    assert not split_cores(dra.topology, cpus), \
        f"a {count}-CPU claim got {fmt(cpus)}, parts of cores {[fmt(c) for c in split_cores(dra.topology, cpus)]}"


@pytest.mark.requirement("CLAIM-604")
def test_numa_selector_lands_on_that_node(dra):
    """A claim whose CEL selector names one NUMA node MUST get CPUs of that node only."""
    nodes = sorted(n for n, cpus in dra.topology.node_cpus.items() if cpus - dra.profile.reserved)
    if len(nodes) < 2:
        not_applicable(f"{dra.topology.name} has one NUMA node: a selector cannot be told from no selector")
    far = nodes[-1]
    need_offered(dra, dra.topology.threads_per_core)
    pod = dra.create_pod(PodSpec.claimed("cl-numa", dra.topology.threads_per_core, numa_node=far))
    cpus = claim_cpus(dra, pod)
    outside = cpus - dra.topology.node_cpus[far]
    assert cpus and not outside, f"claim held to NUMA node {far} got {fmt(cpus)}, {fmt(outside)} outside it"


@pytest.mark.requirement("CLAIM-605")
def test_two_containers_of_one_pod_share_one_claim(dra):
    """Two containers of one pod that consume one claim MUST both run on exactly that claim's CPUs."""
    need_offered(dra, dra.topology.threads_per_core)
    claim = ClaimSpec("cl-duo-c0", dra.topology.threads_per_core)
    spec = PodSpec("cl-duo", (ContainerSpec("c0", (claim.name,)), ContainerSpec("c1", (claim.name,))), (claim,))
    pod = dra.create_pod(spec)
    cpus = claim_cpus(dra, pod)
    records = dra.cpuset_records()
    seen = {c.name: current_cpus(records, c.container_id) for c in pod.containers}
    assert seen == {"c0": cpus, "c1": cpus}, f"claim holds {fmt(cpus)}; containers run on " + \
        ", ".join(f"{n}: {fmt(v)}" for n, v in seen.items())


@pytest.mark.requirement("CLAIM-606")
def test_second_pod_on_a_consumed_claim_is_refused(dra):
    """A second pod naming a claim another running pod consumes MUST NOT run on that claim's CPUs."""
    need_offered(dra, dra.topology.threads_per_core)
    first = dra.create_pod(PodSpec.claimed("cl-owner", dra.topology.threads_per_core))
    (claim,) = first.claims
    cpus = claim_cpus(dra, first)
    intruder = PodSpec("cl-intruder", (ContainerSpec("c0", (claim,)),), existing_claims=(claim,))
    try:
        dra.create_pod(intruder, timeout=30, refusal_grace=None)  # never starting is the passing outcome
        started = True
    except TimeoutError:
        started = False
    records = dra.cpuset_records()
    on_claim = [r for r in creates(records, "cl-intruder", "c0") if r.cpus is None or r.cpus & cpus]
    assert not on_claim, (f"cl-intruder was created on {fmt(on_claim[0].cpus)} while cl-owner holds claim {claim} "
                          f"({fmt(cpus)}); started: {started}; events: {dra.pod('cl-intruder').events[-3:]}")
    assert not started, f"cl-intruder runs on claim {claim}, which cl-owner holds"
