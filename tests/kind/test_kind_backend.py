"""kind e2e of the kind backend: a session over a CCI-patched worker, through the contract only."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from readiness import skip_unless_kind_ready

from cci_conformance.backends.base import SessionConfig
from cci_conformance.backends.checks import check_cpu_manager_state, check_pod_resources, check_snapshot
from cci_conformance.backends.registry import get_backend
from cci_conformance.certify.settings import load_node_profile
from cci_conformance.topology import library

pytestmark = pytest.mark.kind

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "suites"))
from claimkit import claim_pod, exclusive, standard_pod, static_pod  # noqa: E402

GO_REFERENCE = Path(__file__).resolve().parents[2] / "drivers_under_test" / "go-reference"
TOPOLOGY = "server-2s8c-smt2-intel"


MODES = {"coexistence": "static", "alpha": "none"}  # node profile -> the kubelet's CPU manager policy


@pytest.fixture(scope="module", params=sorted(MODES))
def session(request):
    """A session in each mode the patched kubelet implements, each on a cluster of its own."""
    skip_unless_kind_ready("kind backend e2e")
    workdir = Path(tempfile.mkdtemp(prefix="cci-", dir="/tmp"))
    config = SessionConfig(library.load(TOPOLOGY), load_node_profile(request.param), GO_REFERENCE, workdir)
    opened = get_backend("kind").open(config)
    try:
        yield opened
    finally:
        opened.close()
        opened.run.delete()
        shutil.rmtree(workdir, ignore_errors=True)
    name = opened.run.cluster.plan.name
    left = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=io.x-k8s.kind.cluster={name}"],
                          capture_output=True, text=True, check=True).stdout.split()
    assert left == [], f"node containers left behind: {left}"


def _problems(session) -> list[str]:
    snap = session.snapshot()
    listed, allocatable = session.listed_exclusive_cpus(), session.allocatable_cpus()
    return (check_snapshot(snap) + check_pod_resources(listed, allocatable, snap)
            + check_cpu_manager_state(session.persisted_state().cpu_manager_state, snap, snap.policy))


def test_a_claim_a_guaranteed_and_a_shared_pod_agree_on_every_surface(session):
    snap = session.snapshot()
    assert MODES[snap.mode] == snap.policy and snap.drivers == ("go-reference",)
    assert snap.online == library.load(TOPOLOGY).online_cpus and snap.reserved == {0}
    claim = session.create_pod(claim_pod(exclusive(4, "CORE-SIBLING-REQUIRED")))
    static = session.create_pod(static_pod(2))
    shared = session.create_pod(standard_pod())
    assert claim.admitted and static.admitted and shared.admitted
    a, g = claim.containers[0], static.containers[0]
    assert a.source == "cci" and a.exclusive and len(a.cpus) == 4 and a.groups == (a.cpus,)
    if snap.mode == "alpha":  # the none policy pins nobody: a Guaranteed pod runs on the shared pool (spec S3.1)
        assert (g.source, g.exclusive) == ("shared", False) and g.cpus == session.snapshot().shared_pool
        assert session.snapshot().shared_pool == snap.online - a.cpus  # reserved CPUs stay in it (alpha.go)
    else:
        assert (g.source, g.exclusive, len(g.cpus)) == ("static", True, 2)
    # pod-resources lists the grant in both modes (_problems compares List with the store; in alpha the kubelet
    # asks the CCI manager, kubelet-cci patch 0001 GetExclusiveCPUs)
    assert a.cpus in session.listed_exclusive_cpus().values()
    # The kubelet's CCI histograms give the admission's times (a pod without claims: the node's is not measured).
    assert 0 < claim.driver_seconds <= claim.node_seconds and math.isnan(static.node_seconds)
    assert _problems(session) == []
    for result in (claim, static, shared):
        session.delete_pod(result.containers[0].pod_uid)
    after = session.snapshot()
    assert not after.containers and not after.exclusive and after.shared_pool == snap.shared_pool


def test_a_refusal_changes_nothing(session):
    before = session.persisted_state()
    result = session.create_pod(claim_pod(exclusive(64)))
    assert not result.admitted and result.reason == "CCIAdmitError" and "64" in result.message
    assert session.persisted_state() == before and not session.snapshot().containers


def test_restarts_count_as_the_contract_says(session):
    base = session.snapshot()
    session.restart_driver(hard=True)
    driver = session.snapshot()
    assert driver.drivers == base.drivers and driver.registrations == base.registrations + 1
    assert driver.node_generation == base.node_generation
    session.restart_node(hard=True)
    node = session.snapshot()
    assert node.node_generation == base.node_generation + 1 and node.drivers == base.drivers
    assert node.registrations == 1  # counted since the kubelet's start
