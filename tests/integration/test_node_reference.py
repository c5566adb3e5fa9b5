"""The node process with the reference driver: static and CCI grants never meet, pod-resources match the store."""

from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from cci_conformance.backends.base import SessionConfig
from cci_conformance.backends.checks import check_cpu_manager_state, check_pod_resources, check_snapshot
from cci_conformance.backends.registry import get_backend
from cci_conformance.node.api import ClaimRef, ContainerSpec, PodSpec
from cci_conformance.paths import PROFILES_DIR, REFERENCE_DRIVER_DIR
from cci_conformance.topology import library

pytestmark = pytest.mark.integration


def claim(n: int, *attrs: str, groups: list | None = None) -> dict:
    if groups is not None:
        return {"cores": [str(g[0]) for g in groups], "cpu attributes": [list(g[1]) for g in groups]}
    return {"cores": [str(n)], "cpu attributes": [list(attrs) or ["EXCLUSIVE"]]}


def claim_pod(uid: str, params: dict) -> PodSpec:
    return PodSpec("ns", f"pod-{uid}", uid, (ContainerSpec("c", claim="cl"),),
                   (ClaimRef("cl", f"claim-{uid}", params),))


def static_pod(uid: str, cpus: int) -> PodSpec:
    q = str(cpus)
    return PodSpec("ns", f"pod-{uid}", uid, (ContainerSpec("c", q, q, "1Gi", "1Gi"),))


def shared_pod(uid: str) -> PodSpec:
    return PodSpec("ns", f"pod-{uid}", uid, (ContainerSpec("c", "500m"),))


@pytest.fixture(params=["server-2s-snc4", "server-4s16c-smt2"])
def session(request):
    workdir = Path(tempfile.mkdtemp(prefix="cci-", dir="/tmp"))
    profile = yaml.safe_load((PROFILES_DIR / "node" / "coexistence.yaml").read_text())
    s = get_backend("embedded").open(SessionConfig(library.load(request.param), profile,
                                                   REFERENCE_DRIVER_DIR / "driver.yaml", workdir))
    yield s
    s.close()
    assert not workdir.exists(), "close() must remove the workdir"


def all_checks(s) -> list[str]:
    snap = s.snapshot()
    problems = check_snapshot(snap)
    problems += check_cpu_manager_state(s.state_files()["cpu_manager_state"], snap, "static")
    problems += check_pod_resources(s.listed_exclusive_cpus(), s.allocatable_cpus(), snap)
    return problems


def test_static_and_cci_interleaved_never_share(session):
    rng = random.Random(7)
    admitted = 0
    for i in range(24):
        kind = rng.choice(["static", "cci", "cci-denied", "shared", "delete"])
        uid = f"u{i}"
        if kind == "static":
            r = session.create_pod(static_pod(uid, rng.choice([1, 2, 4])))
        elif kind == "cci":
            r = session.create_pod(claim_pod(uid, claim(rng.choice([2, 4, 6]))))
        elif kind == "cci-denied":
            r = session.create_pod(claim_pod(uid, claim(2, "EXCLUSIVE", "CORE-SIBLING-DENIED")))
        elif kind == "shared":
            r = session.create_pod(shared_pod(uid))
        else:
            live = sorted({c.pod_uid for c in session.snapshot().containers})
            if live:
                session.delete_pod(rng.choice(live))
            continue
        assert r.admitted, (kind, r.reason, r.message)
        admitted += 1
        assert all_checks(session) == []
    snap = session.snapshot()
    assert admitted > 10 and len(snap.exclusive) >= 5
    withheld = snap.withheld
    for key, cpus in withheld.items():  # DENIED siblings are accounted to their container, nobody runs there
        assert set(cpus) <= snap.exclusive[key]
        assert not set(cpus) & snap.shared_pool


def test_unmeetable_claim_rejected_and_store_unchanged(session):
    assert session.create_pod(static_pod("s1", 2)).admitted
    assert session.create_pod(claim_pod("c1", claim(4))).admitted
    before_files = session.state_files()
    before = session.snapshot()
    too_many = len(before.online - before.reserved - frozenset().union(*before.exclusive.values())) + 1
    r = session.create_pod(claim_pod("big", claim(too_many)))
    assert not r.admitted and r.reason == "CCIAdmitError" and r.message
    after = session.snapshot()
    assert after.exclusive == before.exclusive and after.shared_pool == before.shared_pool
    assert session.state_files()["cpu_manager_state"] == before_files["cpu_manager_state"]
    assert "pod-big" not in str(session.listed_exclusive_cpus())
    # the driver kept nothing either: the CPUs it refused are still grantable
    assert session.create_pod(claim_pod("fits", claim(too_many - 1 - (too_many - 1) % 2))).admitted
    assert all_checks(session) == []


def test_restarts_keep_everything(session):
    assert session.create_pod(static_pod("s1", 4)).admitted
    assert session.create_pod(claim_pod("c1", claim(4))).admitted
    assert session.create_pod(shared_pod("sh")).admitted
    before = session.snapshot()
    session.restart_node(hard=True)
    session.restart_driver(hard=True)
    after = session.snapshot()
    assert after.node_generation == before.node_generation + 1
    assert after.exclusive == before.exclusive and after.drivers == ("reference",)
    assert all_checks(session) == []
    # a container removed from the runtime while the node was down is reconciled away, its driver told
    session.remove_container_behind_node("c1", "c")
    session.start_node()
    snap = session.snapshot()
    assert "c1/c" not in snap.exclusive and any("gone from the runtime" in e for e in snap.startup)
    assert all_checks(session) == []
    free = len(snap.online - snap.reserved - frozenset().union(*snap.exclusive.values()))
    assert session.create_pod(claim_pod("all", claim(free - free % 2))).admitted  # the driver freed c1's CPUs


def test_evidence_and_close(tmp_path):
    workdir = Path(tempfile.mkdtemp(prefix="cci-", dir="/tmp"))
    profile = yaml.safe_load((PROFILES_DIR / "node" / "alpha.yaml").read_text())
    s = get_backend("embedded").open(SessionConfig(library.load("laptop-1s4c-smt2"), profile,
                                                   REFERENCE_DRIVER_DIR / "driver.yaml", workdir))
    try:
        assert s.create_pod(claim_pod("c1", claim(2))).admitted
        r = s.create_pod(static_pod("g1", 2))  # policy none: a Guaranteed pod runs on the shared pool
        assert r.admitted and r.containers[0].source == "shared"
        files = s.state_files()
        assert files["cpu_manager_state"].startswith(b'{"policyName":"none","defaultCpuSet":"","checksum":')
        names = {p.name for p in s.collect_evidence(tmp_path / "ev")}
        assert {"node.log", "driver.log", "cpu_manager_state", "cci_manager_state", "runtime-cpusets.yaml",
                "snapshot.json"} <= names
        pids = [s.node_pid, s.driver.pid]
    finally:
        s.close()
    assert not workdir.exists()
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
    shutil.rmtree(tmp_path, ignore_errors=True)
