"""The stateful model tells the kubelet's resource-fit refusal (no driver's doing) from any other refusal."""

from __future__ import annotations

import sys

from cci_conformance.node.api import AdmissionResult
from cci_conformance.paths import SUITES_DIR

sys.path.insert(0, str(SUITES_DIR))  # the suites import claimkit as a top-level module
from claimkit import refused_for_cpu_requests  # noqa: E402

# the kubelet v1.34 text, as a real kind node printed it (ACCT-010 on laptop-1s4c-smt2)
KUBELET = "Pod was rejected: Node didn't have enough resource: cpu, requested: 250, used: 6800, capacity: 7000"


def test_a_resource_fit_refusal_whose_figures_add_up_is_the_nodes():
    assert refused_for_cpu_requests(AdmissionResult(False, "OutOfcpu", KUBELET), own_requests_m=6750) == ""


def test_any_other_refusal_of_a_standard_pod_stays_a_failure():
    assert "not a resource-fit refusal" in refused_for_cpu_requests(
        AdmissionResult(False, "CCIAdmitError", "driver said no"), own_requests_m=0)
    assert "not a resource-fit refusal" in refused_for_cpu_requests(
        AdmissionResult(False, "OutOfcpu", "no figures"), own_requests_m=0)


def test_figures_that_do_not_add_up_are_not_believed():
    fits = KUBELET.replace("used: 6800", "used: 1000")
    assert "fit 7000m" in refused_for_cpu_requests(AdmissionResult(False, "OutOfcpu", fits), own_requests_m=0)
    # the node counts less than the pods the model knows are live request: its accounting lost some
    assert "less than the 7000m" in refused_for_cpu_requests(
        AdmissionResult(False, "OutOfcpu", KUBELET), own_requests_m=7000)
