"""Robustness: a claim the driver cannot honour is refused with a reason, and costs the node nothing."""

from __future__ import annotations

import json

import pytest

from cci_conformance.dra.api import ClaimSpec, ContainerSpec, PodSpec, PodState
from cci_conformance.dra.checks import need_offered, pool_problems, settled
from cci_conformance.waiting import WaitTimeout, wait_for

# Parameters no DRA CPU driver can know (an apiVersion of the harness's own example domain): the only correct
# answer is a refusal. A driver that takes parameters must check them; one that takes none must say so.
UNKNOWN_PARAMETERS = {"apiVersion": "conformance.cci-conformance.example/v0", "kind": "NotACpuConfig",
                      "cpus": "not a CPU list"}
# The kubelet's event for a failed NodePrepareResources (pkg/kubelet/events), with the driver's error in it.
REFUSAL = "FailedPrepareDynamicResources"
# Words that name the field: the kubelet's own wording around the driver's error has none of them.
FIELD_WORDS = ("opaque", "parameters")
DECISION_TIMEOUT_S = 90.0


def _decided(pod: PodState) -> PodState | None:
    return pod if pod.running or any(REFUSAL in e for e in pod.events) else None


@pytest.mark.requirement("ROBUST-601")
def test_unusable_opaque_config_is_refused_naming_the_field(dra):
    """A claim carrying opaque parameters for the driver that it cannot use MUST NOT be prepared: its pod does not
    start, the refusal names the configuration field, and no CPU leaves the shared pool."""
    need_offered(dra, dra.topology.threads_per_core)
    dra.create_pod(PodSpec.shared("rb-shared"))
    claim = ClaimSpec("rb-config-c0", dra.topology.threads_per_core, opaque=json.dumps(UNKNOWN_PARAMETERS))
    dra.create_pod(PodSpec("rb-config", (ContainerSpec("c0", (claim.name,)),), (claim,)), wait=False)
    try:
        pod = wait_for(lambda: _decided(dra.pod("rb-config")), timeout=DECISION_TIMEOUT_S, interval=1.0,
                       what="rb-config running or its preparation refused")
    except WaitTimeout:
        pytest.fail(f"rb-config neither ran nor was refused within {DECISION_TIMEOUT_S:.0f} s: "
                    f"events {dra.pod('rb-config').events[-3:]}")
    assert not pod.running, f"rb-config runs although its claim carries parameters {UNKNOWN_PARAMETERS}: the " \
        "driver prepared a claim it cannot honour (it must refuse parameters it does not know)"
    refusal = next(e for e in pod.events if REFUSAL in e)
    assert any(word in refusal.lower() for word in FIELD_WORDS), \
        f"the refusal names no configuration field ({' or '.join(FIELD_WORDS)}): {refusal}"
    problems = settled(lambda: pool_problems(dra, ["rb-shared"], frozenset()))
    assert not problems, "the refused claim took CPUs from the shared pool: " + "; ".join(problems)
