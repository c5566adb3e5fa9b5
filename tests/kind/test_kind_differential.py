"""Differential check: the kubelet's cpu_manager_state and our static CPU manager's agree, step by step."""

from __future__ import annotations

import pytest
from kind_plans import INTEL, INTEL_PROFILE, SNC4, SNC4_PROFILE

from cci_conformance.kind.cluster.node_access import NodeAccess
from cci_conformance.kind.differential import (
    Step,
    first_difference,
    g,
    run_on_embedded,
    run_on_kubelet,
    run_on_model,
)
from cci_conformance.node.profile import parse_config
from cci_conformance.topology import library
from cci_conformance.waiting import wait_for

pytestmark = pytest.mark.kind

# Mixed sizes, multi-container pods, shared-pool pods and deletions; requests stay within allocatable.
INTEL_STEPS = [
    Step("d-g4", g("4")), Step("d-bu1", (("500m", "1"),)), Step("d-g1", g("1")), Step("d-be", ((None, None),)),
    Step("d-g2x2", g("2", "2")), Step("d-gfrac", g("1500m")), Step("d-g6", g("6")), Step("d-g3", g("3")),
    Step("d-g4"), Step("d-g6b", g("6")), Step("d-gmix", g("2", "500m")), Step("d-g4b", g("4")), Step("d-g1"),
    Step("d-g2", g("2")), Step("d-bu2", (("1", "4"),)), Step("d-g6"), Step("d-g6c", g("6")),
]
# full-pcpus-only: odd requests are rejected with SMTAlignmentError; sub-NUMA nodes interleave CPU ids.
SNC4_STEPS = [
    Step("s-g2", g("2")), Step("s-g3", g("3")), Step("s-g20", g("20")), Step("s-bu", (("1", "2"),)),
    Step("s-g4", g("4")), Step("s-g10", g("10")), Step("s-g1", g("1")), Step("s-be", ((None, None),)),
    Step("s-g2x4", g("2", "4")), Step("s-g20"), Step("s-g8", g("8")), Step("s-g6frac", g("6", "500m")),
    Step("s-g16", g("16")), Step("s-g4"), Step("s-g12", g("12")),
]


@pytest.mark.parametrize(("topology", "profile", "steps", "worker_index"), [
    (INTEL, INTEL_PROFILE, INTEL_STEPS, 1),
    (SNC4, SNC4_PROFILE, SNC4_STEPS, 2),
], ids=["intel-reserved0", "snc4-fullpcpus"])
def test_static_cpu_manager_matches_the_kubelet(cluster, topology, profile, steps, worker_index):
    assert sum(1 for s in steps if not s.is_delete) >= 12
    node = cluster.node_names()[worker_index]
    # Start from an empty assignment table, as the model does (earlier tests may still be releasing).
    wait_for(lambda: not NodeAccess(node).cpu_manager_state().entries, timeout=60, interval=0.5,
             what=f"{node} to have no exclusive assignments")
    created = [s.name for s in steps if not s.is_delete]
    try:
        real, uids = run_on_kubelet(cluster, node, steps)
    finally:
        for name in created:
            cluster.kubectl("delete", "pod", name, "--ignore-not-found", "--wait=false")
    # Our static CPU manager as a library, and inside the embedded node process, fed the API server's UIDs.
    model = run_on_model(library.load(topology), parse_config(profile), steps, uids)
    assert first_difference(steps, real, model) is None, first_difference(steps, real, model, "library")
    embedded = run_on_embedded(library.load(topology), profile, steps, uids)
    assert first_difference(steps, real, embedded) is None, first_difference(steps, real, embedded, "embedded")
    rejected = [name for name, outcome in real.outcomes.items() if outcome != "admitted"]
    if topology == SNC4:
        assert rejected == ["s-g3", "s-g1"], "full-pcpus-only must reject odd requests"
