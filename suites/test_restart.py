"""Checkpoint and restart: node, driver and both restarts, stale containers and interrupted admissions."""

from __future__ import annotations

import json
import threading

import pytest
from claimkit import (
    available_now,
    claim_pod,
    driver_client,
    exclusive,
    fmt,
    handle,
    node_problems,
    sent_claim,
    shared,
    standard_pod,
    static_pod,
)

from cci_conformance.certify.outcomes import require_feature
from cci_conformance.waiting import wait_for


def accounting(node) -> tuple:
    snap = node.snapshot()
    return (snap.exclusive, snap.shared_pool,
            sorted((c.pod_uid, c.container, c.store_cpus, c.runtime_cpus, c.exclusive) for c in snap.containers))


def denied_siblings(topology, driver_manifest) -> tuple[str, ...]:
    """CORE-SIBLING-DENIED where it withholds something and the driver declared it (S1.11: never beyond the base)."""
    return ("CORE-SIBLING-DENIED",) if topology.threads_per_core > 1 and driver_manifest.has("core-siblings") else ()


def load(pods, topology, node_config, driver_manifest) -> list:
    denied = denied_siblings(topology, driver_manifest)
    small = len(available_now(pods.session.snapshot())) < 16
    results = [pods.create(claim_pod(shared(2))), pods.create(claim_pod(exclusive(1 if small else 2))),
               pods.create(standard_pod()), pods.create(claim_pod(exclusive(2, *denied)))]
    if node_config.policy == "static":
        results.append(pods.create(static_pod(1)))
    assert all(r.admitted for r in results), [r.message for r in results if not r.admitted]
    return results


def fill_all(node, pods) -> object:
    """Admit one exclusive claim of every available CPU: succeeds only if no CPU was lost by node or driver.

    Static pods are deleted first: claims placed after static pods are the accounting suite's business."""
    for c in node.snapshot().containers:
        if c.source == "static":
            pods.delete(c.pod_uid)
    room = len(available_now(node.snapshot()))
    result = pods.create(claim_pod(exclusive(room)))
    assert result.admitted, f"the node's {room} free CPUs could not all be granted: {result.reason}: {result.message}"
    return result


def readmit(node, result, parameters) -> object:
    a = result.containers[0]
    client = driver_client(node)
    try:
        namespace, claim_uid, claim_name = sent_claim(node, a.pod_uid, a.container)
        return client.admit(pod=a.pod_uid, container=a.container, claim_uid=claim_uid, claim_name=claim_name,
                            namespace=namespace, claim=handle(parameters),
                            available=available_now(node.snapshot()) | a.cpus)
    finally:
        client.close()


@pytest.mark.requirement("RESTART-001")
@pytest.mark.fresh_node  # restarts, kills or pauses: a node of its own (docs/certification.md)
def test_node_restart_keeps_every_cpuset(node, pods, topology, node_config, driver_manifest):
    """After a node restart (kill -9) every live container MUST keep its CPUs and the ledger MUST be unchanged."""
    load(pods, topology, node_config, driver_manifest)
    before = accounting(node)
    node.restart_node(hard=True)
    assert accounting(node) == before, "the node's ledger changed across its restart"
    assert not node_problems(node), node_problems(node)
    fill_all(node, pods)


@pytest.mark.requirement("RESTART-002")
@pytest.mark.fresh_node  # restarts, kills or pauses: a node of its own (docs/certification.md)
@pytest.mark.needs("restart-recovery")
def test_driver_restart_keeps_its_admissions(node, pods):
    """After a driver restart (kill -9) a retried CCIAdmit of an earlier admission MUST return the same CPUs."""
    n = max(1, min(3, (len(available_now(node.snapshot())) - 2) // 2))  # two exclusive grants leave room for 2
    parameters = exclusive(n)
    first, second = pods.create(claim_pod(exclusive(n))), pods.create(claim_pod(parameters))
    third = pods.create(claim_pod(shared(2)))  # a SHARED admission is kept and retried as well (S1.5, S1.9)
    assert first.admitted and second.admitted and third.admitted
    node.restart_driver(hard=True)
    pods.delete(first.containers[0].pod_uid)  # frees other CPUs: a driver that forgot would pick those
    for result, claim in ((second, parameters), (third, shared(2))):
        retry = readmit(node, result, claim)
        before = fmt(result.containers[0].cpus)
        assert not retry.err and retry.rSet.cpuset == before, \
            f"after the restart the driver answered {retry.rSet.cpuset or retry.err!r} for {claim}, before {before}"


@pytest.mark.requirement("RESTART-006")
@pytest.mark.fresh_node  # restarts, kills or pauses: a node of its own (docs/certification.md)
@pytest.mark.needs("restart-recovery")
def test_driver_restart_never_grants_live_cpus_again(node, pods, topology, driver_manifest):
    """After a driver restart it MUST NOT grant CPUs of live admissions again, even if availableCpus offers them."""
    denied = denied_siblings(topology, driver_manifest)
    live = [pods.create(claim_pod(p)) for p in (exclusive(2), exclusive(2, *denied))]
    assert all(r.admitted for r in live)
    snap = node.snapshot()
    held = frozenset().union(*snap.exclusive.values())
    node.restart_driver(hard=True)
    stale_view = snap.online - snap.reserved  # a node view that forgot the live grants (docs/spec.md S1.4)
    count = len(stale_view - held) + 1  # only a driver that forgot its grants can meet it
    client = driver_client(node)
    try:
        reply = client.admit(pod="stale-view-pod", container="c0", claim_uid="claim-stale-view",
                             claim=exclusive(count), available=stale_view)
        if not reply.err:  # undo by container id (the empty-id path is another requirement's business)
            client.add(pod="stale-view-pod", container="c0", container_id="5" * 64)
            client.remove(claim_uid="claim-stale-view", container_id="5" * 64)
    finally:
        client.close()
    granted = _cpus(reply.rSet.cpuset) if not reply.err else frozenset()
    assert not granted & held, f"the restarted driver granted {fmt(granted & held)}, held by live admissions"


def _cpus(text: str):
    from cci_conformance.cpuset import parse_cpulist

    return parse_cpulist(text)


@pytest.mark.requirement("RESTART-003")
@pytest.mark.fresh_node  # restarts, kills or pauses: a node of its own (docs/certification.md)
@pytest.mark.needs("restart-recovery")
def test_node_and_driver_restart_keep_every_grant(node, pods, topology, node_config, driver_manifest):
    """After the node and the driver both restart, every grant MUST be kept and later admissions MUST respect it."""
    results = load(pods, topology, node_config, driver_manifest)
    before = accounting(node)
    node.stop_driver(hard=True)
    node.restart_node(hard=True)
    node.start_driver()
    assert accounting(node) == before, "the ledger changed across the restart of node and driver"
    last = fill_all(node, pods)
    assert not node_problems(node), node_problems(node)
    pods.delete(last.containers[0].pod_uid)
    for r in results:
        if r.containers[0].source != "static":
            pods.delete(r.containers[0].pod_uid)
    fill_all(node, pods)


@pytest.mark.requirement("RESTART-007")
@pytest.mark.fresh_node  # restarts, kills or pauses: a node of its own (docs/certification.md)
@pytest.mark.needs("restart-recovery")
def test_remove_after_driver_restart_frees_the_cpus(node, pods):
    """CCIRemoveContainerResource for a container admitted before a driver restart MUST free its CPUs."""
    first = pods.create(claim_pod(exclusive(4)))
    assert first.admitted
    node.restart_driver(hard=True)
    pods.delete(first.containers[0].pod_uid)
    fill_all(node, pods)


@pytest.mark.requirement("RESTART-008")
@pytest.mark.fresh_node  # restarts, kills or pauses: a node of its own (docs/certification.md)
@pytest.mark.parametrize("hard", [True, False], ids=["kill", "sigterm"])  # S1.9: after any restart
def test_removed_admissions_stay_free_after_a_driver_restart(node, pods, topology, driver_manifest, hard):
    """After a driver restart (kill -9 or SIGTERM) nothing of an admission removed before it MUST come back: a
    claim of every available CPU is granted (a state file that kept the removed admissions would hold their CPUs
    again)."""
    denied = denied_siblings(topology, driver_manifest)
    n = 1 if len(available_now(node.snapshot())) < 12 else 2  # kept, both grants and DENIED's siblings must fit
    kept = pods.create(claim_pod(exclusive(1)))  # a live admission across the restart, beside the removed ones
    removed = [pods.create(claim_pod(p)) for p in (exclusive(n), exclusive(n, *denied), shared(2))]
    assert kept.admitted and all(r.admitted for r in removed), [r.message for r in removed if not r.admitted]
    for r in removed:
        pods.delete(r.containers[0].pod_uid)
    node.restart_driver(hard=hard)
    room = len(available_now(node.snapshot()))
    fill = pods.create(claim_pod(exclusive(room)))
    gone = fmt(frozenset().union(*(r.containers[0].cpus for r in removed)))
    assert fill.admitted, (f"after the driver restart its {room} free CPUs could not all be granted; the admissions "
                           f"removed before it held {gone}: {fill.reason}: {fill.message}")
    assert not fill.containers[0].cpus & kept.containers[0].cpus and not node_problems(node), node_problems(node)


@pytest.mark.requirement("RESTART-004")
@pytest.mark.fresh_node  # restarts, kills or pauses: a node of its own (docs/certification.md)
def test_container_gone_while_node_down_is_released(node, pods, topology, node_config, driver_manifest):
    """A container that vanished while the node was down MUST be dropped and its CPUs freed in node and driver."""
    results = load(pods, topology, node_config, driver_manifest)
    gone = results[1].containers[0]  # an exclusive grant: its CPUs must come back
    node.remove_container_behind_node(gone.pod_uid, gone.container)
    node.restart_node(hard=True)
    snap = node.snapshot()
    assert all((c.pod_uid, c.container) != (gone.pod_uid, gone.container) for c in snap.containers)
    assert not gone.cpus & frozenset().union(*snap.exclusive.values()), "the vanished container's CPUs are held"
    wait_for(lambda: not node.snapshot().pending, 10.0, what="the node to deliver the owed CCIRemoveContainerResource")
    pods.forget(gone.pod_uid)
    pods.delete(gone.pod_uid)
    fill_all(node, pods)


@pytest.mark.requirement("RESTART-005")
@pytest.mark.fresh_node  # restarts, kills or pauses: a node of its own (docs/certification.md)
@pytest.mark.parametrize("answered", [False, True], ids=["driver-never-answered", "answer-lost"])
def test_node_killed_during_admission_leaves_nothing_half_granted(node, pods, answered):
    """A node and driver killed while CCIAdmit is in flight MUST come back with the pod absent and no CPU lost.

    ``driver-never-answered``: both die before the driver reads the call. ``answer-lost``: the driver makes
    the grant after the node died (its answer goes nowhere), then dies; the node's rollback (a Remove with an
    empty container_id, S3.5) must make the driver let go of it, whatever the driver kept across its restart."""
    require_feature(node, "driver-pause")
    require_feature(node, "node-stop")
    before = node.snapshot()
    room, offered = len(available_now(before)), available_now(before)
    parameters = exclusive(2)
    pod = claim_pod(parameters)
    node.pause_driver()  # the driver has the request but has not answered (kill -9 of a stopped process works)
    outcome: list = []
    worker = threading.Thread(target=lambda: outcome.append(_try(node.create_pod, pod)), daemon=True)
    granted: frozenset[int] = frozenset()
    try:
        worker.start()
        wait_for(lambda: admission_intent(node), 10.0, interval=0.01, what="the node to record its admission intent")
        claim = claim_in_flight(node, pod.uid) if answered else None
        node.stop_node(hard=True)
        if answered:
            node.resume_driver()
            granted = grant_as_the_node_asked(node, pod, claim, parameters, offered)
        node.stop_driver(hard=True)
    finally:
        node.resume_driver()
    worker.join(15)
    node.start_node()
    node.start_driver()  # its registration is when the node rolls the interrupted claim back
    wait_for(lambda: not node.snapshot().pending, 10.0, what="the node to roll back the interrupted admission")
    snap = node.snapshot()
    mine = [c for c in snap.containers if c.pod_uid == pod.uid or (c.namespace, c.pod_name) == (pod.namespace,
                                                                                                 pod.name)]
    held: frozenset[int] = frozenset().union(*(c.store_cpus for c in mine if c.exclusive))
    if mine:
        # A real kubelet still has the pod from its API server and may admit it afresh once the driver is back
        # (docs/spec.md S3.9): a new admission, which must be whole. A node without one brings no pod back.
        assert node.pods_from_api_server, f"the interrupted pod came back on a node that has no API server: {mine}"
        assert all(c.running for c in mine) and len(held) == 2, f"the interrupted pod is half there: {mine}"
    assert len(available_now(snap)) == room - len(held) and not node_problems(node), node_problems(node)
    # The driver's books: every CPU the node holds for nobody must be grantable again, the rolled-back grant's
    # included. A driver that acknowledged the rollback but kept the grant refuses this claim.
    free = len(available_now(node.snapshot()))
    last = pods.create(claim_pod(exclusive(free)))
    assert last.admitted, (f"after the rollback the driver could not grant the node's {free} free CPUs "
                           f"(the rolled-back grant held {fmt(granted) if granted else 'what the driver chose'}): "
                           f"{last.reason}: {last.message}")


def claim_in_flight(node, pod_uid: str) -> tuple[str, str, str]:
    """(namespace, claim_uid, claim_name) of the admission the node has in flight for ``pod_uid``, read from its
    checkpoint's owed Removes (docs/spec.md S3.5: the intent names the claim it will roll back)."""
    pending = json.loads(node.persisted_state().cci_content).get("pending", [])
    intents = [e for e in pending if e.get("why") == "admission"]
    mine = [e for e in intents if e.get("podUID") == pod_uid]
    if not mine and node.pods_from_api_server and len(intents) == 1:
        # A real kubelet names the pod by the API server's uid, not the spec's; this test has one admission in flight
        mine = intents
    for entry in mine:
        return entry["namespace"], entry["claimUID"], entry["claimName"]
    raise AssertionError(f"the node's checkpoint names no claim in flight for pod {pod_uid}")


def grant_as_the_node_asked(node, pod, claim: tuple[str, str, str], parameters: dict, offered) -> frozenset[int]:
    """Make sure the driver holds the grant the dead node asked for: the same CCIAdmit again, which the driver
    answers after the node's own (calls are serialised), idempotently if it already made it (S1.5). Returns
    its CPUs; none when the driver refused the repeat (a refusal is CLAIM-018's business, not this test's:
    a driver refusing a repeat as a conflict holds the node's own grant, and the rollback must free it)."""
    namespace, claim_uid, claim_name = claim
    client = driver_client(node)
    try:
        reply = client.admit(pod=pod.uid, container=pod.containers[0].name, claim_uid=claim_uid,
                             claim_name=claim_name, namespace=namespace, claim=handle(parameters), available=offered)
    finally:
        client.close()
    return frozenset() if reply.err else _cpus(reply.rSet.cpuset)


def admission_intent(node) -> bool:
    """The node made its admission intent durable (read from its checkpoint: the node is busy admitting)."""
    return any(owed.why == "admission" for owed in node.persisted_state().pending)


def _try(fn, *args):
    try:
        return fn(*args)
    except Exception as exc:  # the node died under the call: that is the point
        return exc
