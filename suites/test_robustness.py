"""Robustness: malformed parameters, exhaustion, unknown containers, hanging or dying drivers, clean shutdown."""

from __future__ import annotations

import time

import grpc
import pytest
from claimkit import (
    available_now,
    claim_pod,
    driver_client,
    exclusive,
    ledger,
    sent_claim,
    shared,
    standard_pod,
)

from cci_conformance.certify.outcomes import require_feature

MANY_LIVE = 100  # live admissions the deadline test keeps (more than a small fixed-size table holds)
BATCH = 10  # admissions created back to back before the deadline is checked (one over it ends the test), where the
# node takes its pods from an API server (kind); a node handed each pod in one call (embedded) gains nothing from a
# batch, so there it is one: a driver that hangs stops the test at its first late answer, not up to ten later
REMOVED = 5  # of them, deleted one by one to time CCIRemoveContainerResource with the rest still live

# (case, parameters, what the err must name): S1.6 promises the user the offending key, attribute or
# index (and the fix); an err such as "invalid request" names nothing to fix. Matched case-insensitively.
# A case whose parameters use a capability (capabilities.capabilities_used: several `cores` entries, a
# CORE-SIBLING-*, NUMA or device attribute) needs it: a driver without it may refuse it for that reason
# alone (S1.11), so it is not sent one (tests/selftest/test_case_capabilities.py checks every case).
MALFORMED = [
    ("not an object", "four arrays, please", ("object",)),
    ("unknown key", {"cores": ["2"], "colour": ["blue"]}, ("colour",)),
    ("missing cores", {"cpu attributes": [["EXCLUSIVE"]]}, ("cores",)),
    ("count not a number", {"cores": ["two"]}, ("cores", "two")),
    ("count of zero", {"cores": ["0"]}, ("cores",)),
    ("unequal arrays", {"cores": ["1"], "cpu attributes": [["EXCLUSIVE"], ["SHARED"]]}, ("cpu attributes",)),
    ("unknown cpu attribute", {"cores": ["1"], "cpu attributes": [["TURBO"]]}, ("TURBO",)),
    ("bad second group", {"cores": ["1", "1"], "cpu attributes": [["EXCLUSIVE"], ["TURBO"]]},
     ("cpu attributes", "TURBO", "1"), "groups"),
    ("exclusive and shared", {"cores": ["1"], "cpu attributes": [["EXCLUSIVE", "SHARED"]]}, ("EXCLUSIVE", "SHARED")),
    ("denied without exclusive", {"cores": ["1"], "cpu attributes": [["SHARED", "CORE-SIBLING-DENIED"]]},
     ("CORE-SIBLING-DENIED",), "core-siblings"),
    ("unknown mem attribute", {"cores": ["1"], "mem attributes": ["HUGE_PAGE_SIZE_1M"]}, ("HUGE_PAGE_SIZE_1M",)),
    ("device affinity without device", {"cores": ["1"], "device attributes": ["NUMA-DEVICE-AFFINITY-REQUIRED"]},
     ("device",), "device-affinity"),
    ("device that does not exist", {"cores": ["1"], "device attributes": [
        {"affinity": "NUMA-DEVICE-AFFINITY-REQUIRED", "device": "0000:ff:1f.7"}]}, ("0000:ff:1f.7",),
     "device-affinity"),
]
MALFORMED_CASES = [pytest.param(parameters, names, id=case, marks=[pytest.mark.needs(*needs)] if needs else [])
                   for case, parameters, names, *needs in MALFORMED]


@pytest.mark.requirement("ROBUST-001")
@pytest.mark.parametrize(("parameters", "names"), MALFORMED_CASES)
def test_malformed_parameters_are_refused_with_a_clear_error(node, pods, parameters, names):
    """Malformed claim parameters MUST be refused with an err naming the offending key, attribute or index,
    change nothing, and leave the driver serving."""
    if not isinstance(parameters, dict):
        require_feature(node, "raw-parameters")
    before = ledger(node)
    result = pods.create(claim_pod(parameters))
    case = f"{parameters!r:.60}"
    assert not result.admitted and result.reason == "CCIAdmitError", f"{case}: {result.reason}: {result.message}"
    missing = [n for n in names if n.lower() not in result.message.lower()]
    assert not missing, f"{case}: the err does not name {missing} (docs/spec.md S1.6): {result.message!r}"
    assert ledger(node) == before
    assert pods.create(claim_pod(exclusive(1))).admitted, "the driver stopped serving after a malformed claim"


@pytest.mark.requirement("ROBUST-002")
def test_exhaustion_is_refused_and_recovers(node, pods):
    """A claim larger than availableCpus MUST be refused with an err, never partly granted; freed CPUs serve again."""
    room = len(available_now(node.snapshot()))
    too_big = pods.create(claim_pod(exclusive(room + 1)))
    assert not too_big.admitted and too_big.reason == "CCIAdmitError", (too_big.reason, too_big.message)
    full = pods.create(claim_pod(exclusive(room)))
    assert full.admitted, f"{full.reason}: {full.message}"
    for parameters in (exclusive(1), shared(1)):
        extra = pods.create(claim_pod(parameters))
        assert not extra.admitted and extra.reason == "CCIAdmitError", (parameters, extra.reason, extra.message)
    pods.delete(full.containers[0].pod_uid)
    assert pods.create(claim_pod(exclusive(room))).admitted


@pytest.mark.requirement("ROBUST-003")
def test_driver_answers_within_the_deadline_with_many_live_admissions(node_session_factory, node_config):
    """The driver MUST answer every CCI call (Admit, Add, Remove) within the node's RPC deadline, however many
    admissions are live."""
    session = node_session_factory()  # closed at the end: cheaper than deleting every pod
    deadline = node_config.rpc_timeout_s
    exclusive_ones = min(8, len(available_now(session.snapshot())) // 2)
    slowest = 0.0
    admitted = []
    claims = [exclusive(1) if i < exclusive_ones else shared(1) for i in range(MANY_LIVE)]
    batch = BATCH if session.pods_from_api_server else 1
    for first in range(0, MANY_LIVE, batch):
        # back to back, admitted one at a time (create_pods); settle=False: what is judged is each call's time,
        # not the shared cpusets (backends/base.py)
        # overlap: a node may take the next pods while earlier ones start; a deadline, not a budget, is judged
        for i, result in enumerate(session.create_pods([claim_pod(c) for c in claims[first:first + batch]],
                                                       settle=False, overlap=True), start=first):
            assert result.admitted, f"admission {i + 1} failed: {result.reason}: {result.message}"
            slowest = max(slowest, result.driver_seconds)  # CCIAdmit plus CCIAddContainerResource
            # one admission over the deadline decides the verdict: stop at the end of its batch, not after 100
            assert slowest < deadline, f"admission {i + 1} of {MANY_LIVE} took {slowest:.2f}s of driver time, " \
                                       f"deadline {deadline:g}s (stopped there: the verdict was decided)"
            admitted.append(result.containers[0])
    # S1.8: every call has the deadline, Remove included. The node sends Remove when a pod is deleted and
    # keeps it as owed (snapshot.pending) when the driver misses the deadline.
    # the claim the node sent for the last one, read before it goes (only needed where its socket is reachable)
    gone_claim = sent_claim(session, admitted[-1].pod_uid, admitted[-1].container) \
        if "cci-endpoint" in session.features else None
    # What is judged is the driver's answer, not the node's whole deletion: the node gives up a Remove at the
    # deadline and keeps it owed, so an owed Remove is a missed deadline; a real kubelet's deletion also waits
    # for its own housekeeping (container stop, reconcile), which no driver controls.
    for a in admitted[-REMOVED:]:
        session.delete_pod(a.pod_uid)
        owed = session.snapshot().pending
        assert not owed, f"CCIRemoveContainerResource missed the {deadline:g}s deadline with ~{MANY_LIVE} live: {owed}"
    # A repeated Add and a repeated Remove change nothing (S1.7) and must be as prompt: the node retries both.
    # They go to the driver's socket: a backend without it leaves this test not-applicable (driver_client),
    # not passed on the calls timed through the node above.
    live, gone = admitted[0], admitted[-1]
    client = driver_client(session, deadline)
    try:
        calls = {"CCIAddContainerResource": lambda: client.add(pod=live.pod_uid, container=live.container,
                                                               container_id=live.container_id),
                 "CCIRemoveContainerResource": lambda: client.remove(namespace=gone_claim[0],
                                                                     claim_uid=gone_claim[1],
                                                                     claim_name=gone_claim[2],
                                                                     container_id=gone.container_id)}
        for rpc, call in calls.items():
            start = time.perf_counter()
            try:
                reply = call()
            except grpc.RpcError as exc:
                pytest.fail(f"{rpc} with {len(admitted) - REMOVED} live: {exc.code()} (deadline {deadline:g}s)")
            took = time.perf_counter() - start
            assert not reply.err and took < deadline, f"{rpc}: err {reply.err!r} after {took:.2f}s"
    finally:
        client.close()


@pytest.mark.requirement("ROBUST-004")
@pytest.mark.fresh_node  # restarts, kills or pauses: a node of its own (docs/certification.md)
def test_dead_driver_gives_a_clear_refusal_and_serves_again_after_restart(node, pods):
    """While the driver is dead claim pods MUST be refused with a clear reason; restarted, it MUST serve again."""
    kept = pods.create(claim_pod(exclusive(2)))
    assert kept.admitted
    node.stop_driver(hard=True)
    refused = pods.create(claim_pod(exclusive(1)))
    assert not refused.admitted and refused.reason in ("DriverUnavailable", "DriverNotRegistered"), refused
    assert pods.create(standard_pod()).admitted, "the node stopped admitting standard pods"
    node.start_driver()
    again = pods.create(claim_pod(exclusive(2)))
    assert again.admitted and not again.containers[0].cpus & kept.containers[0].cpus, again


@pytest.mark.requirement("ROBUST-005")
def test_add_for_a_container_never_admitted_is_refused(node, pods):
    """CCIAddContainerResource for a container never admitted MUST get an err and leave every grant unchanged."""
    live = pods.create(claim_pod(exclusive(2)))
    assert live.admitted
    before = ledger(node)
    client = driver_client(node)
    try:
        reply = client.add(pod="never-admitted", container="c0", container_id="e" * 64)
    finally:
        client.close()
    assert reply.err, "Add for a container that was never admitted succeeded"
    assert ledger(node) == before
    pods.delete(live.containers[0].pod_uid)
    assert pods.create(claim_pod(exclusive(len(available_now(node.snapshot()))))).admitted


@pytest.mark.requirement("ROBUST-006")
@pytest.mark.fresh_node  # restarts, kills or pauses: a node of its own (docs/certification.md)
def test_sigterm_removes_both_sockets(node, pods):
    """On SIGTERM the driver MUST stop, remove its registration and CCI sockets, and exit."""
    require_feature(node, "cci-endpoint")
    endpoint = node.cci_endpoint()
    node.stop_driver(hard=False)  # returns once the node saw the registration socket go away
    assert not endpoint.exists(), f"{endpoint} is still there after SIGTERM"
    assert not node.snapshot().drivers
    node.start_driver()
    assert pods.create(claim_pod(exclusive(1))).admitted


@pytest.mark.requirement("ROBUST-007")
def test_hanging_driver_is_refused_at_the_deadline_and_the_node_goes_on(node_session_factory, node_profile):
    """A CCIAdmit the driver never answers MUST end in a DriverTimeout refusal within the deadline; the node goes on."""
    session = node_session_factory(node_profile={**node_profile, "rpcTimeoutSeconds": 1})
    require_feature(session, "driver-pause")
    # One answered call first: both nodes dial the driver lazily, and a frozen driver cannot finish a first
    # connection's handshake, which fails at once as DriverUnavailable and proves no deadline. On a live
    # connection the frozen driver's silence can only end at the deadline.
    warm = session.create_pod(claim_pod(exclusive(1)))
    assert warm.admitted, f"the driver refused a 1-CPU claim before it was frozen: {warm.reason}: {warm.message}"
    session.delete_pod(warm.containers[0].pod_uid)
    session.pause_driver()
    try:
        result = session.create_pod(claim_pod(exclusive(1)))
        # The time the node waited on the driver for this admission (AdmissionResult.driver_seconds: the
        # CCIAdmit and the rollback's Remove, each under the deadline; on kind the kubelet's CCI driver-call
        # histogram). The deadline bounds exactly that: the pod's scheduling and sandbox, and the node's own
        # checkpoint writes (an fsync can stall for seconds on a busy disk), are not its business. NaN fails.
        took = result.driver_seconds
        assert not result.admitted and result.reason == "DriverTimeout", result
        assert took < 1 + 1 + 2.0, (f"the node waited {took:.1f}s on the driver to refuse for a 1s deadline (admit + "
                                    f"rollback; {result.node_seconds:.1f}s in all)")
        # and nothing else holds the refusal up: a generous bound on the node's whole time (on kind its CCI
        # admission histogram; NaN fails), against a deadline missing on some other call of the path
        assert result.node_seconds < 1 + 1 + 8.0, f"the node took {result.node_seconds:.1f}s in all to refuse"
        assert session.create_pod(standard_pod()).admitted, "the node stopped admitting after the timeout"
    finally:
        session.resume_driver()
    session.restart_driver(hard=True)  # re-registration delivers the rollback the paused driver missed
    room = len(available_now(session.snapshot()))
    late = session.create_pod(claim_pod(exclusive(room)))
    assert late.admitted, f"CPUs lost to the timed-out admission: {late.reason}: {late.message}"
