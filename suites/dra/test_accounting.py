"""No double accounting: the shared pool is exactly online - reserved - grants after every allocation and release."""

from __future__ import annotations

import pytest

from cci_conformance.dra.api import PodSpec
from cci_conformance.dra.checks import claim_cpus, creates, current_cpus, expected_pool, fmt, pool_problems, settled

# dra-driver-cpu takes at most 32 CPUs a claim in individual mode (upstream #290): the fill of the pool uses
# claims no larger, so that limit never decides ACCT-602
FILL_CLAIM_MAX = 16


@pytest.mark.requirement("ACCT-601")
def test_shared_pool_is_exactly_what_no_claim_holds(dra):
    """Every container without a claim MUST run on exactly online - reserved - granted CPUs after each allocation
    and each release."""
    tpc = dra.topology.threads_per_core
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
    left = len(dra.topology.online_cpus - dra.profile.reserved)
    counts = [FILL_CLAIM_MAX] * (left // FILL_CLAIM_MAX) + ([left % FILL_CLAIM_MAX] if left % FILL_CLAIM_MAX else [])
    try:
        dra.create_pod(PodSpec.claimed("ep-all", *counts), timeout=60)
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
