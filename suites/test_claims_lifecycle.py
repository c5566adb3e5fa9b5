"""Claim lifecycle: a refusal leaves no trace, Remove frees, repeated calls, groups, ranges and cpulists."""

from __future__ import annotations

import pytest
from claimkit import (
    admitter,
    available_now,
    claim_pod,
    driver_client,
    exclusive,
    fmt,
    group,
    handle,
    ledger,
    multi_claim_pod,
    params,
    sent_claim,
    shared,
)

BIND_REQ = "NUMA-MEM-AFFINITY-BIND-REQUIRED"


@pytest.fixture
def grant(node, pods, topology, driver_manifest):
    """``grant(parameters) -> (result, problems)``: admit a claim pod; problems = §2 violations of its CPUs."""
    return admitter(node, pods, topology, driver_manifest)


# ------------------------------------------------------------------ failures, removal, idempotence
@pytest.mark.requirement("CLAIM-015")
def test_refused_admission_leaves_no_trace(node, pods, topology, grant):
    """A refused admission MUST change nothing: holdings, pool, pod-resources, state files, the driver's free CPUs."""
    grant(exclusive(2))
    before = ledger(node)
    room = len(available_now(node.snapshot()))
    refused = [exclusive(room + 1), shared(room + 1)]  # well-formed claims that cannot be met (malformed: ROBUST-001)
    if len(topology.node_cpus) > 1:
        refused.append(exclusive(max(len(c) for c in topology.node_cpus.values()) + 1, mem=BIND_REQ))
    for parameters in refused:
        result = pods.create(claim_pod(parameters))
        assert not result.admitted, f"{parameters} was admitted"
        assert ledger(node) == before, f"refusing {parameters} changed the node's accounting"
    result, problems = grant(exclusive(room))
    assert not problems, problems


@pytest.mark.requirement("CLAIM-016")
def test_removed_grant_is_free_for_the_next_admission(node, pods, topology, driver_manifest, grant):
    """After CCIRemoveContainerResource every CPU of the grant, withheld siblings included, MUST be free again."""
    room = len(available_now(node.snapshot()))
    sequence = [exclusive(room), shared(room)]
    whole = [c for c in topology.cores if c <= available_now(node.snapshot())]
    if topology.threads_per_core > 1 and driver_manifest.has("core-siblings"):
        # One thread of every whole free core withholds all the others (S2.4); after Remove the next grant
        # needs every CPU, siblings included, so a driver that keeps them in its own books is refused there.
        sequence.append(exclusive(len(whole), "CORE-SIBLING-DENIED"))
    sequence.append(exclusive(room))
    for parameters in sequence:
        result, problems = grant(parameters)
        assert not problems, problems
        pods.delete(result.containers[0].pod_uid)
        assert len(available_now(node.snapshot())) == room, f"{parameters} is not wholly free after Remove"


@pytest.mark.requirement("CLAIM-019")
@pytest.mark.needs("groups")
def test_groups_are_disjoint_and_rset_is_their_union(pods, topology, driver_manifest, grant):
    """Each core group MUST get its own disjoint set meeting its attributes, and rSet MUST be their union."""
    claims = [params(group(2, "EXCLUSIVE"), group(4, "SHARED")),
              params(group(1, "SHARED"), group(3, "EXCLUSIVE"), group(2, "EXCLUSIVE"))]
    # a DENIED group withholds siblings beside the others; sent only to a driver declaring it (S1.11)
    if topology.threads_per_core > 1 and driver_manifest.has("core-siblings"):
        claims.append(params(group(2, "EXCLUSIVE", "CORE-SIBLING-DENIED"), group(2, "SHARED")))
    for parameters in claims:
        result, problems = grant(parameters)
        a = result.containers[0]
        assert len(a.groups) == len(parameters["cores"]) and not problems, problems or a.groups
        pods.delete(a.pod_uid)


@pytest.mark.requirement("CLAIM-020")
@pytest.mark.needs("core-ranges")
def test_range_grants_a_count_inside_the_range(node, pods, grant):
    """For a range LOW-HIGH the group MUST get between LOW and HIGH CPUs, kept for the admission's life."""
    room = len(available_now(node.snapshot()))
    _, problems = grant(params(group("2-4", "EXCLUSIVE")))
    assert not problems, problems
    result, problems = grant(params(group(f"1-{room + 4}", "SHARED")))
    assert not problems, problems


@pytest.mark.requirement("CLAIM-021")
def test_replies_are_wellformed_cpulists_of_online_cpus(node, pods, topology, driver_manifest, grant):
    """Every returned cpuset MUST be a valid Linux cpulist of online CPUs (the node refuses anything else)."""
    room = len(available_now(node.snapshot()))
    shapes = [exclusive(n) for n in sorted({1, 2, 3, 4, 6, 8, room // 2}) if n < room] + [shared(room)]
    if driver_manifest.has("core-ranges"):
        shapes.append(params(group("2-6", "EXCLUSIVE")))
    for parameters in shapes:
        result, problems = grant(parameters)
        assert not problems, problems
        assert result.containers[0].cpus <= topology.online_cpus
        pods.delete(result.containers[0].pod_uid)


@pytest.mark.requirement("CLAIM-018")
def test_repeated_admit_returns_the_same_grant(node, pods, driver_manifest, grant):
    """A repeated CCIAdmit for the same (pod, container, claim) MUST return the same cpuset and grant nothing new,
    for either kind of group (S1.5 covers every admission: the node retries shared claims as well), and the same
    groups for a claim of several."""
    # SHARED first, on an idle node: a driver that places a repeat anew may pick other CPUs of the same pool
    claims = [shared(2), exclusive(3)]
    if driver_manifest.has("groups"):
        claims.append(params(group(1, "EXCLUSIVE"), group(2, "SHARED")))
    for parameters in claims:
        result, _ = grant(parameters)
        a = result.containers[0]
        answered = frozenset().union(*a.groups) if a.groups else a.cpus  # the driver's rSet, as the node took it
        client = driver_client(node)
        try:
            namespace, claim_uid, claim_name = sent_claim(node, a.pod_uid, a.container)
            retry = client.admit(pod=a.pod_uid, container=a.container, claim_uid=claim_uid,
                                 claim_name=claim_name, namespace=namespace, claim=handle(parameters),
                                 available=available_now(node.snapshot()) | answered)
        finally:
            client.close()
        kind = "EXCLUSIVE" if a.exclusive else "SHARED"
        assert not retry.err, f"a retried CCIAdmit of a {kind} claim was refused: {retry.err}"
        assert retry.rSet.cpuset == fmt(answered) and retry.rSet.exclusive == a.exclusive, \
            f"the retry of a {kind} claim answered {retry.rSet.cpuset} (exclusive={retry.rSet.exclusive}), the " \
            f"first answer {fmt(answered)} (exclusive={a.exclusive})"
        if a.groups:  # S1.5: same groups, in claim order
            again = [g.cpuset for g in retry.groups]
            assert again == [fmt(g) for g in a.groups], f"the retry answered groups {again}, first {a.groups}"
        pods.delete(a.pod_uid)
    room = len(available_now(node.snapshot()))
    _, problems = grant(exclusive(room))
    assert not problems, problems


@pytest.mark.requirement("CLAIM-017")
def test_repeated_or_unknown_remove_succeeds_and_changes_nothing(node, pods, grant):
    """A repeated CCIRemoveContainerResource, or one for an unknown container id, MUST succeed and change nothing."""
    removed = [grant(exclusive(2))[0].containers[0], grant(shared(2))[0].containers[0]]  # either kind of group
    kept, _ = grant(exclusive(2))
    client = driver_client(node)
    try:
        repeats = []
        for a in removed:
            namespace, claim_uid, claim_name = sent_claim(node, a.pod_uid, a.container)
            pods.delete(a.pod_uid)
            repeats.append(client.remove(claim_uid=claim_uid, claim_name=claim_name, namespace=namespace,
                                         container_id=a.container_id).err)
        unknown = client.remove(claim_uid="claim-never-seen", claim_name="claim", container_id="f" * 64)
    finally:
        client.close()
    assert not any(repeats) and not unknown.err, f"repeated (exclusive, shared): {repeats}; unknown: {unknown.err!r}"
    room = len(available_now(node.snapshot()))
    later, problems = grant(exclusive(room))
    assert not problems and not later.containers[0].cpus & kept.containers[0].cpus, problems


@pytest.mark.requirement("CLAIM-015")
def test_refused_pod_gives_back_the_grants_of_its_earlier_containers(node, pods, grant):
    """When a later container of a pod is refused, the grants of its earlier containers MUST be released."""
    before = ledger(node)
    room = len(available_now(node.snapshot()))
    result = pods.create(multi_claim_pod(exclusive(2), exclusive(room)))
    assert not result.admitted, "a pod asking for more than the node has was admitted"
    assert ledger(node) == before, "the refused pod changed the node's accounting"
    _, problems = grant(exclusive(room))
    assert not problems, problems
