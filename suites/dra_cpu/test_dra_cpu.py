"""The dra-cpu requirements, one test each, judged on every kind cluster of the run that measures them.

Each test reads the findings of its cluster's scenarios (cci_conformance/kind/dracpu_scenarios.py,
dracpu_restarts.py, dracpu_static.py), which the `dra_run` fixture runs once per cluster; a finding
that fails fails the test with its evidence, one measured but not judged skips it (docs/dra-cpu.md).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.dra_cpu


@pytest.mark.requirement("CLAIM-501")
def test_claimed_container_runs_on_exactly_its_allocation(dra_judge):
    dra_judge("CLAIM-501")


@pytest.mark.requirement("CLAIM-502")
def test_claims_are_pairwise_disjoint(dra_judge):
    dra_judge("CLAIM-502")


@pytest.mark.requirement("CLAIM-503")
def test_second_consumer_of_a_claim_is_refused(dra_judge):
    dra_judge("CLAIM-503")


@pytest.mark.requirement("CLAIM-504")
def test_claims_get_whole_cores_first(dra_judge):
    dra_judge("CLAIM-504")


@pytest.mark.requirement("ACCT-501")
def test_shared_pool_never_overlaps_a_grant(dra_judge):
    dra_judge("ACCT-501")


@pytest.mark.requirement("ACCT-502")
def test_empty_shared_pool_never_hands_out_every_cpu(dra_judge):
    dra_judge("ACCT-502")


@pytest.mark.requirement("RESTART-501")
def test_restarted_container_keeps_its_cpus(dra_judge):
    dra_judge("RESTART-501")


@pytest.mark.requirement("RESTART-502")
def test_container_created_while_the_driver_is_down(dra_judge):
    dra_judge("RESTART-502")


@pytest.mark.requirement("RESTART-503")
def test_driver_restart_keeps_every_allocation(dra_judge):
    dra_judge("RESTART-503")


@pytest.mark.requirement("ROBUST-501")
def test_published_devices_match_sysfs(dra_judge):
    dra_judge("ROBUST-501")


@pytest.mark.requirement("ROBUST-502")
def test_static_policy_is_honoured_or_refused(dra_judge):
    dra_judge("ROBUST-502")


@pytest.mark.requirement("LAT-501")
def test_claim_preparation_latency(dra_judge):
    dra_judge("LAT-501")


@pytest.mark.requirement("REG-501")
def test_driver_registers_and_becomes_ready(dra_judge):
    dra_judge("REG-501")
