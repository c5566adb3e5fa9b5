"""No double accounting: the shared pool is exactly online - reserved - grants after every allocation and release."""

from __future__ import annotations

import pytest

from cci_conformance.dra.api import ClaimSpec, ContainerSpec, PodSpec
from cci_conformance.dra.checks import (
    claim_cpus,
    creates,
    current_cpus,
    expected_pool,
    fmt,
    need_offered,
    pool_problems,
    settled,
)

# dra-driver-cpu takes at most 32 CPUs a claim in individual mode (upstream #290): the fill of the pool uses
# claims no larger, so that limit never decides ACCT-602
FILL_CLAIM_MAX = 16


@pytest.mark.requirement("ACCT-601")
def test_shared_pool_is_exactly_what_no_claim_holds(dra):
    """Every container without a claim MUST run on exactly online - reserved - granted CPUs after each allocation
    and each release."""
    tpc = dra.topology.threads_per_core
    need_offered(dra, 2 * tpc)
    dra.create_pod(PodSpec.shared("ac-shared"))
    grants = frozenset()
    steps = []
    for name in ("ac-one", "ac-two"):
        grants |= claim_cpus(dra, dra.create_pod(PodSpec.claimed(name, tpc)))
        steps.append((f"after {name} was allocated", grants,
                      settled(lambda g=grants: pool_problems(dra, ["ac-shared"], g))))
    dra.delete_pod("ac-one")
    grants = claim_cpus(dra, dra.pod("ac-two"))
    steps.append(("after ac-one was released", grants, settled(lambda: pool_problems(dra, ["ac-shared"], grants))))
    dra.create_pod(PodSpec.shared("ac-late"))
    steps.append(("for a shared pod created beside ac-two", grants,
                  settled(lambda: pool_problems(dra, ["ac-shared", "ac-late"], grants))))
    failed = [f"{when} (pool must be {fmt(expected_pool(dra, g))}): {'; '.join(p)}" for when, g, p in steps if p]
    assert not failed, " | ".join(failed)


@pytest.mark.requirement("ACCT-602")
def test_a_claim_that_would_empty_the_shared_pool_is_refused_or_held(dra):
    """While a shared container runs, claims of every CPU left MUST NOT run on them (refused or held, as the driver
    chooses): the shared container MUST keep a non-empty cpuset that no running claim holds."""
    dra.create_pod(PodSpec.shared("ep-shared"))
    free = dra.topology.online_cpus - dra.profile.reserved
    left = len(free)
    if dra.device_mode == "grouped":
        # a group device is one NUMA node: a claim per node, all of its CPUs, held to it by a selector
        claims = tuple(ClaimSpec(f"ep-all-n{node}", len(cpus & free), numa_node=node)
                       for node, cpus in sorted(dra.topology.node_cpus.items()) if cpus & free)
    else:
        sizes = [FILL_CLAIM_MAX] * (left // FILL_CLAIM_MAX) + ([left % FILL_CLAIM_MAX] if left % FILL_CLAIM_MAX else [])
        claims = tuple(ClaimSpec(f"ep-all-c{i}", n) for i, n in enumerate(sizes))
    counts = [c.count for c in claims]
    try:
        dra.create_pod(PodSpec("ep-all", (ContainerSpec("c0", tuple(c.name for c in claims)),), claims), timeout=60,
                       refusal_grace=None)  # never starting is the passing outcome: wait it all out
        started = True
    except TimeoutError:
        started = False
    state = dra.pod("ep-all")
    records = dra.cpuset_records()
    made = creates(records, "ep-all", "c0")
    shared = [current_cpus(records, c.container_id) for c in dra.pod("ep-shared").containers]
    assert not started and not made, (
        f"ep-all, claiming all {left} CPUs in claims of {counts}, was created on {fmt(made[0].cpus if made else None)}"
        f" (running: {started}) while ep-shared runs on {', '.join(map(fmt, shared))}: the shared pool was handed out")
    assert all(s is None or s for s in shared), f"ep-shared was left an empty cpuset: {shared}"
    assert state.phase != "Running", f"ep-all is {state.phase}; events {state.events[-3:]}"


@pytest.mark.requirement("ACCT-603")
@pytest.mark.dra_profile("static-reserved")
def test_a_claim_beside_a_pinned_guaranteed_pod_gets_other_cpus_or_a_reason(dra):
    """Under the kubelet's static policy with reserved CPUs, a claim beside a Guaranteed pod MUST get CPUs no pinned
    container uses, or be refused with a reason that names the policy."""
    dra.require("checkpoints")
    tpc = dra.topology.threads_per_core
    need_offered(dra, tpc, pinned=tpc)
    pinned_pod = dra.create_pod(PodSpec("st-pinned", (ContainerSpec("c0", guaranteed_cpus=tpc),)))
    pinned = dra.checkpoints().cpu_manager.pinned()
    assert pinned, f"the kubelet ({dra.profile.describe()}) pinned nothing for Guaranteed pod st-pinned " \
        f"({pinned_pod.phase}): this node does not run the static policy the test needs"
    try:
        pod = dra.create_pod(PodSpec.claimed("st-claim", tpc), timeout=60, refusal_grace=None)  # a refusal may pass
    except TimeoutError:
        events = dra.pod("st-claim").events
        assert any("static" in e.lower() or "policy" in e.lower() for e in events), \
            f"st-claim was held or refused without naming the CPU manager policy; events: {events[-3:]}"
        return
    cpus = claim_cpus(dra, pod)
    runs_on = current_cpus(dra.cpuset_records(), pod.container("c0").container_id)
    both = (cpus | (runs_on or dra.topology.online_cpus)) & pinned
    assert not both, f"st-claim got {fmt(cpus)} and runs on {fmt(runs_on)}; the kubelet pinned {fmt(pinned)} to " \
        f"st-pinned: {fmt(both)} are granted twice"
