"""Pod and claim builders plus public-surface observers shared by the conformance suites."""

from __future__ import annotations

import itertools
import json
import re

from cci_conformance.backends.checks import check_cpu_manager_state, check_pod_resources, check_snapshot
from cci_conformance.certify.outcomes import require_feature
from cci_conformance.cpuset import CPUs, format_cpulist
from cci_conformance.node.api import AdmissionResult, ClaimRef, ContainerSpec, NodeSnapshot, PodSpec
from cci_conformance.protocol.semantics import GroupReply, Violation, check_admission
from cci_conformance.topology.model import Topology

NAMESPACE = "conformance"
STANDARD_CPU_REQUEST_M = 250  # a standard pod's CPU request, in millicores
_UIDS = itertools.count(1)


def new_uid(prefix: str = "pod") -> str:
    return f"{prefix}-{next(_UIDS):05d}"


def group(cores, *cpu: str, mem: str = "NO-MEM-AFFINITY", device: str | None = None,
          affinity: str = "NO-DEVICE-AFFINITY") -> dict:
    """One core group: ``group(4, "EXCLUSIVE", "CORE-SIBLING-DENIED", mem=..., device=..., affinity=...)``."""
    dev = affinity if device is None else {"affinity": affinity, "device": device}
    return {"cores": str(cores), "cpu": list(cpu) or ["SHARED"], "mem": mem, "device": dev}


def params(*groups: dict) -> dict:
    """Claim parameters (docs/spec.md S2.1) from groups built by :func:`group`."""
    return {"cores": [g["cores"] for g in groups], "cpu attributes": [g["cpu"] for g in groups],
            "mem attributes": [g["mem"] for g in groups], "device attributes": [g["device"] for g in groups]}


def exclusive(n: int, *extra: str, **kw) -> dict:
    return params(group(n, "EXCLUSIVE", *extra, **kw))


def shared(n: int, *extra: str, **kw) -> dict:
    return params(group(n, "SHARED", *extra, **kw))


def claim_pod(parameters: dict | str, uid: str | None = None, containers: int = 1) -> PodSpec:
    """A pod whose containers each use one claim (each container gets its own admission, S1.3)."""
    uid = uid or new_uid("cci")
    claim = ClaimRef(name="claim", uid=f"claim-{uid}", parameters=parameters)
    specs = tuple(ContainerSpec(name=f"c{i}", claim="claim") for i in range(containers))
    return PodSpec(NAMESPACE, f"name-{uid}", uid, specs, (claim,))


def static_pod(cpus: int, uid: str | None = None) -> PodSpec:
    """A Guaranteed pod with an integer CPU request: the static CPU manager gives it exclusive CPUs."""
    uid = uid or new_uid("static")
    q = str(cpus)
    return PodSpec(NAMESPACE, f"name-{uid}", uid, (ContainerSpec("c0", q, q, "100Mi", "100Mi"),))


def standard_pod(uid: str | None = None) -> PodSpec:
    """A Burstable pod: it runs on the shared pool."""
    uid = uid or new_uid("std")
    return PodSpec(NAMESPACE, f"name-{uid}", uid, (ContainerSpec("c0", f"{STANDARD_CPU_REQUEST_M}m", "1"),))


# The kubelet's resource-fit admission (lifecycle predicate handler, InsufficientResourceError) refuses a pod
# whose requests exceed what the node has left: "Node didn't have enough resource: cpu, requested: 250,
# used: 6800, capacity: 7000". Claims carry no CPU request, so no driver takes part in that refusal.
_INSUFFICIENT_CPU = re.compile(r"enough resource: cpu, requested: (\d+), used: (\d+), capacity: (\d+)")


def refused_for_cpu_requests(result: AdmissionResult, own_requests_m: int) -> str:
    """Why ``result`` is not the kubelet's resource-fit refusal ("" when it is): reason OutOfcpu, figures that
    add up (requested + used > capacity), and ``used`` counting at least the ``own_requests_m`` millicores of
    the pods the caller knows are live."""
    m = _INSUFFICIENT_CPU.search(result.message)
    if result.reason != "OutOfcpu" or not m:
        return f"not a resource-fit refusal ({result.reason}: {result.message})"
    requested, used, capacity = map(int, m.groups())
    if requested + used <= capacity:
        return f"OutOfcpu although {requested}m requested + {used}m used fit {capacity}m"
    if used < own_requests_m:
        return f"OutOfcpu counting {used}m used, less than the {own_requests_m}m the live pods request"
    return ""


# ---- observing ----
def held(snap: NodeSnapshot) -> CPUs:
    """Every CPU somebody holds (static grants, CCI exclusive grants, withheld siblings)."""
    return frozenset().union(*snap.exclusive.values()) if snap.exclusive else frozenset()


def available_now(snap: NodeSnapshot) -> CPUs:
    """The availableCpus the node sends with the next CCIAdmit (docs/spec.md S1.4, S3.2)."""
    return snap.online - snap.reserved - held(snap)


def withheld_of(snap: NodeSnapshot, key: str) -> CPUs:
    """The siblings the node holds back for ``key`` (none when the container withholds nothing)."""
    return snap.withheld[key] if key in snap.withheld else frozenset()


def assignment(result: AdmissionResult, container: str = "c0"):
    return next(a for a in result.containers if a.container == container)


def reply_groups(result: AdmissionResult, snap_after: NodeSnapshot, container: str = "c0") -> list[GroupReply]:
    """The driver's groups as the node recorded them; a group is exclusive when the node holds it."""
    a = assignment(result, container)
    key = f"{a.pod_uid}/{a.container}"
    holds = snap_after.exclusive.get(key, frozenset()) - withheld_of(snap_after, key)
    groups = a.groups or (a.cpus,)
    return [GroupReply(frozenset(g), bool(g) and frozenset(g) <= holds) for g in groups]


def violations(parameters: dict, topology: Topology, capabilities, available: CPUs, result: AdmissionResult,
               snap_after: NodeSnapshot, container: str = "c0", held_by_others: CPUs = frozenset()) -> list[Violation]:
    """Every docs/spec.md §2 rule the admitted container's CPUs break. The checker reads the parameters itself
    (never through the drivers' parser), so ``capabilities`` is unused and kept for callers."""
    groups = reply_groups(result, snap_after, container)
    a = assignment(result, container)
    return check_admission(parameters, topology, available, groups, rset_cpuset=a.cpus, rset_exclusive=a.exclusive,
                           held_by_others=held_by_others)


def node_problems(session, strict_reservation: bool = False, snap: NodeSnapshot | None = None) -> list[str]:
    """Node-wide invariants on every public surface: snapshot, runtime cpusets, pod-resources, cpu_manager_state.
    ``snap``: a snapshot the caller just took, read again otherwise."""
    snap = session.snapshot() if snap is None else snap
    problems = check_snapshot(snap, strict_reservation)
    problems += check_pod_resources(session.listed_exclusive_cpus(), session.allocatable_cpus(), snap)
    problems += check_cpu_manager_state(session.persisted_state().cpu_manager_state, snap, snap.policy)
    return problems


def ledger(session) -> tuple:
    """What a refused admission must leave unchanged: holdings, pool, containers, pod-resources, checkpoints
    (PersistedState.cci_content leaves out the counters every write changes)."""
    snap = session.snapshot()
    saved = session.persisted_state()
    return (snap.exclusive, snap.shared_pool, sorted((c.pod_uid, c.container, c.store_cpus) for c in snap.containers),
            session.listed_exclusive_cpus(), saved.cpu_manager_state, saved.cci_content)


def fmt(cpus) -> str:
    return format_cpulist(cpus) or "(empty)"


def free_cores(topology: Topology, free: CPUs) -> list[CPUs]:
    return [c for c in topology.cores if c <= free]


def sent_claim(session, pod_uid: str, container: str) -> tuple[str, str, str]:
    """(namespace, claim_uid, claim_name) the node sent the driver for this container, read from the node: a
    backend names claims its own way (kind: the ResourceClaim's uid and name), so a retried call must use
    these, or it is a call about another claim and proves nothing about a repeat."""
    for c in session.snapshot().containers:
        if (c.pod_uid, c.container) == (pod_uid, container):
            assert c.claim_uid and c.claim_name, f"the node reports no claim for CCI container {pod_uid}/{container}"
            return c.namespace, c.claim_uid, c.claim_name
    raise AssertionError(f"no container {pod_uid}/{container} on the node")


def driver_client(session, deadline_s: float = 5.0):
    """A CCI client on the driver's own socket, for calls the node never repeats (retries after a lost reply)."""
    from cci_conformance.drivers.client import CCIClient

    require_feature(session, "cci-endpoint")
    return CCIClient(session.cci_endpoint(), deadline_s=deadline_s)


def handle(parameters: dict) -> str:
    """The resource_handle the node sends for these parameters (sorted-key JSON)."""
    return json.dumps(parameters, sort_keys=True)


def multi_claim_pod(*parameters: dict, uid: str | None = None) -> PodSpec:
    """A pod whose container ``c<i>`` uses its own claim ``claim<i>`` (admitted in order, S3.4)."""
    uid = uid or new_uid("multi")
    claims = tuple(ClaimRef(name=f"claim{i}", uid=f"claim{i}-{uid}", parameters=p) for i, p in enumerate(parameters))
    specs = tuple(ContainerSpec(name=f"c{i}", claim=f"claim{i}") for i in range(len(parameters)))
    return PodSpec(NAMESPACE, f"name-{uid}", uid, specs, claims)


def admitter(node, pods, topology, driver_manifest):
    """``admit(parameters) -> (result, problems)``: admit a claim pod; problems = §2 violations of its CPUs
    (the claim suites' ``grant`` fixture)."""

    def admit(parameters: dict, expect_admitted: bool = True):
        before = node.snapshot()
        result = pods.create(claim_pod(parameters))
        if not expect_admitted:
            return result, []
        assert result.admitted, f"claim {parameters} refused: {result.reason}: {result.message}"
        after = node.snapshot()
        return result, [str(v) for v in violations(parameters, topology, driver_manifest.capabilities,
                                                   available_now(before), result, after)]

    return admit
