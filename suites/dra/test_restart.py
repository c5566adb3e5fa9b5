"""Checkpoint recovery: kubelet restarts (kill -9 and systemctl), a pod deleted while it was down, driver restarts,
a pod created while the driver is away, a container restart."""

from __future__ import annotations

import pytest

from cci_conformance.dra.api import PodSpec
from cci_conformance.dra.checks import (
    claim_cpus,
    creates,
    current_cpus,
    fmt,
    need_offered,
    overlaps_over_time,
    pool_problems,
    settled,
)
from cci_conformance.waiting import WaitTimeout, wait_for


def _moved(dra, start: int, pods: dict[str, frozenset[int]]) -> list[str]:
    """Every record since ``start`` that asked a claimed container for other CPUs than its claim's."""
    out = []
    for r in dra.cpuset_records()[start:]:
        if r.pod in pods and r.kind == "container" and (r.op == "create" or r.cpus) and r.cpus != pods[r.pod]:
            out.append(f"record {r.index}: {r.pod}/{r.container} {r.op} on {fmt(r.cpus)}, "
                       f"its claim is {fmt(pods[r.pod])}")
    return out


@pytest.mark.requirement("RESTART-601")
@pytest.mark.parametrize("hard", [True, False], ids=["kill-9", "systemctl-restart"])
def test_kubelet_restart_keeps_claimed_containers_on_their_cpus(dra, hard):
    """After a kubelet restart, killed or restarted by systemd, claimed containers MUST keep their CPUs and their
    claims MUST NOT be prepared again onto other CPUs."""
    dra.require("kubelet-restart")
    need_offered(dra, 2 * dra.topology.threads_per_core)
    dra.create_pod(PodSpec.shared("kr-shared"))
    held = dra.create_pod(PodSpec.claimed("kr-held", dra.topology.threads_per_core))
    cpus = claim_cpus(dra, held)
    before = {c.name: c.container_id for c in held.containers}
    start = len(dra.cpuset_records())
    dra.restart_kubelet(hard=hard)
    after = dra.create_pod(PodSpec.claimed("kr-after", dra.topology.threads_per_core))
    now = dra.pod("kr-held")
    moved = _moved(dra, start, {"kr-held": cpus})
    late = claim_cpus(dra, after)
    kept = claim_cpus(dra, now)
    assert kept == cpus, f"kr-held's claim was {fmt(cpus)}, after the restart {fmt(kept)}"
    assert {c.name: c.container_id for c in now.containers} == before, "kr-held's containers were replaced"
    assert not moved, "; ".join(moved)
    assert not late & cpus, f"a claim prepared after the restart got {fmt(late & cpus)} of kr-held's CPUs"
    problems = settled(lambda: pool_problems(dra, ["kr-shared"], cpus | late))
    assert not problems, "; ".join(problems)


@pytest.mark.requirement("RESTART-602")
def test_pod_deleted_while_kubelet_is_down_is_unprepared_and_its_cpus_return(dra):
    """A claimed pod deleted while the kubelet is down MUST be unprepared when it is back, its CPUs in the pool."""
    dra.require("kubelet-stop")
    dra.require("checkpoints")
    need_offered(dra, dra.topology.threads_per_core)
    dra.create_pod(PodSpec.shared("kd-shared"))
    gone = dra.create_pod(PodSpec.claimed("kd-gone", dra.topology.threads_per_core))
    (claim,) = gone.claims
    cpus = claim_cpus(dra, gone)
    dra.stop_kubelet()
    try:
        dra.delete_pod("kd-gone")
    finally:
        dra.start_kubelet()
    try:
        wait_for(lambda: dra.checkpoints().claim(claim) is None, timeout=60, interval=1.0,
                 what=f"claim {claim} gone from dra_manager_state")
        unprepared = True
    except WaitTimeout:
        unprepared = False
    problems = settled(lambda: pool_problems(dra, ["kd-shared"], frozenset()))
    assert unprepared, f"claim {claim} ({fmt(cpus)}) is still in the kubelet's dra_manager_state after it came back"
    assert not problems, f"kd-gone's {fmt(cpus)} did not return: " + "; ".join(problems)


@pytest.mark.requirement("RESTART-603")
@pytest.mark.parametrize("hard", [True, False], ids=["killed", "graceful"])
def test_driver_restart_loses_no_grant(dra, hard):
    """After a driver restart a claimed container MUST keep its CPUs, no shared container MUST get them, and a
    claim made after it MUST get other CPUs."""
    dra.require("driver-restart")
    need_offered(dra, 2 * dra.topology.threads_per_core)
    dra.create_pod(PodSpec.shared("dr-shared"))
    held = dra.create_pod(PodSpec.claimed("dr-held", dra.topology.threads_per_core))
    cpus = claim_cpus(dra, held)
    start = len(dra.cpuset_records())
    dra.restart_driver(hard=hard)
    dra.create_pod(PodSpec.shared("dr-shared2"))
    after = claim_cpus(dra, dra.create_pod(PodSpec.claimed("dr-after", dra.topology.threads_per_core)))
    moved = _moved(dra, start, {"dr-held": cpus})
    assert not moved, "; ".join(moved)
    assert not after & cpus, f"the claim made after the restart got {fmt(after & cpus)} of dr-held's CPUs"
    problems = settled(lambda: pool_problems(dra, ["dr-shared", "dr-shared2"], cpus | after))
    assert not problems, "; ".join(problems)


@pytest.mark.requirement("RESTART-604")
def test_pod_created_while_driver_is_away_waits_or_gets_the_pool(dra):
    """While the driver is away a claimed pod MUST NOT start, and once it is back every shared container MUST be on
    the pool and the claimed pod on its claim."""
    dra.require("driver-stop")
    need_offered(dra, 2 * dra.topology.threads_per_core)
    held = dra.create_pod(PodSpec.claimed("da-held", dra.topology.threads_per_core))
    cpus = claim_cpus(dra, held)
    dra.stop_driver()
    try:
        dra.create_pod(PodSpec.shared("da-shared"), wait=False)
        dra.create_pod(PodSpec.claimed("da-late", dra.topology.threads_per_core), wait=False)
        early = dra.pod("da-late").running
    finally:
        dra.start_driver()
    wait_for(lambda: dra.pod("da-late").running and dra.pod("da-shared").running, timeout=120, interval=1.0,
             what="da-late and da-shared running after the driver came back")
    late = claim_cpus(dra, dra.pod("da-late"))
    records = dra.cpuset_records()
    first = creates(records, "da-late", "c0")
    assert not early, "da-late ran while the driver that must prepare its claim was away"
    assert first and first[0].cpus == late, f"da-late was created on {fmt(first[0].cpus if first else None)}, " \
        f"its claim is {fmt(late)}"
    problems = settled(lambda: pool_problems(dra, ["da-shared"], cpus | late))
    assert not problems, "; ".join(problems)


@pytest.mark.requirement("RESTART-605")
def test_restarted_container_comes_back_on_its_claim(dra):
    """A claimed container killed and restarted by the kubelet MUST come back on exactly its claim's CPUs, and no
    shared container MUST be given them while it is down (its claim stays prepared until the pod goes)."""
    dra.require("container-restart")
    need_offered(dra, dra.topology.threads_per_core)
    dra.create_pod(PodSpec.shared("cr-shared"))
    held = dra.create_pod(PodSpec.claimed("cr-held", dra.topology.threads_per_core))
    cpus = claim_cpus(dra, held)
    start = len(dra.cpuset_records())
    dra.stop_container("cr-held", "c0")
    wait_for(lambda: dra.pod("cr-held").container("c0").restart_count >= 1 and dra.pod("cr-held").running,
             timeout=120, interval=1.0, what="cr-held/c0 restarted")
    now = dra.pod("cr-held").container("c0")
    records = dra.cpuset_records()
    have = current_cpus(records, now.container_id)
    # a driver that releases the claim when its container stops (dra-driver-cpu #235) widens the shared
    # containers onto it until the container is back: every update of that window counts
    shared = {("cr-shared", c.name) for c in dra.pod("cr-shared").containers}
    lent = overlaps_over_time(records[start:], {("cr-held", "c0"): cpus}, among=shared)
    assert have == cpus, f"cr-held/c0 came back on {fmt(have)}, its claim is {fmt(cpus)}"
    assert not lent, f"while cr-held/c0 ({fmt(cpus)}) was down: " + "; ".join(lent)
