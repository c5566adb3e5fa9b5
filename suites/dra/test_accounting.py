"""No double accounting: the shared pool is exactly online - reserved - grants after every allocation and release."""

from __future__ import annotations

import pytest

from cci_conformance.dra.api import PodSpec
from cci_conformance.dra.checks import claim_cpus, expected_pool, fmt, pool_problems, settled


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
