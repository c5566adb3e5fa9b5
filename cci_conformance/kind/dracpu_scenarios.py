"""The dra-cpu scenarios on one kind worker: drive pods and claims, then judge requirements from the records."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from ..cpuset import format_cpulist
from ..waiting import WaitTimeout, wait_for
from . import dracpu_log, dracpu_slices
from .dracpu_log import Grant, Replay
from .dracpu_manifests import APP, NAMESPACE
from .dracpu_pods import NAMESPACE as POD_NS
from .dracpu_pods import fill_counts
from .dracpu_session import ClaimedPod, DraCpuSession

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
# What ROBUST-501 compares per device mode (dracpu_slices.mismatches / group_mismatches).
WHAT_MATCHED = {"individual": "CPU ids, numaNodeID, socketID, coreID, coreType, cacheL3ID, smtEnabled",
                "grouped": "one per NUMA node, numaNodeID, socketID, numCPUs"}


@dataclass
class Finding:
    requirement: str
    verdict: str
    scenario: str
    evidence: list[str] = field(default_factory=list)
    figures: list[dict] = field(default_factory=list)  # report.json figures: name, value, unit

    def as_dict(self) -> dict:
        return {"requirement": self.requirement, "verdict": self.verdict, "scenario": self.scenario,
                "evidence": self.evidence, "figures": self.figures}


def grants_of(pods: list[ClaimedPod], end: int | None = None) -> list[Grant]:
    return [Grant(claim, POD_NS, p.pod, "c0", cpus, end) for p in pods for claim, cpus in p.cpus.items()]


def union_of(p: ClaimedPod) -> frozenset[int]:
    return frozenset().union(*p.cpus.values())


def is_driver(v: dracpu_log.Violation) -> bool:
    return v.container[0] == NAMESPACE and v.container[1].startswith(APP)


def replay(s: DraCpuSession, grants: list[Grant], start: int, live: set[str]) -> list[dracpu_log.Violation]:
    s.checkpoint()
    records = s.log_records()
    gone = dracpu_log.gone_from_checkpoints(records, s.checkpoints)
    return Replay(grants, gone).run(records, start, live)


def begin(s: DraCpuSession) -> tuple[int, set[str]]:
    s.checkpoint()
    return len(s.log_records()), s.running_ids()


def summarize(violations: list[dracpu_log.Violation], limit: int = 4) -> list[str]:
    lines = [v.describe() for v in violations[:limit]]
    return lines + ([f"... and {len(violations) - limit} more"] if len(violations) > limit else [])


def registration(s: DraCpuSession) -> list[Finding]:
    published = s.published()
    ok = s.ready_seconds is not None and bool(published)
    evidence = [f"DaemonSet pod Ready and ResourceSlices published {s.ready_seconds:.1f} s after apply "
                f"(deadline 180 s)", f"{len(published)} devices in the slices of {s.node}"]
    found = [Finding("REG-501", PASS if ok else FAIL, "deploy", evidence)]
    check = dracpu_slices.group_mismatches if s.deployment.device_mode == "grouped" else dracpu_slices.mismatches
    problems = check(s.topology, published, s.deployment.reserved_cpus)
    found.append(Finding("ROBUST-501", FAIL if problems else PASS, "deploy",
                         problems[:6] or [f"{len(published)} devices: {WHAT_MATCHED[s.deployment.device_mode]} "
                                          "all as the rendered sysfs"]))
    return found


def steady(s: DraCpuSession) -> list[Finding]:
    """Claims of different sizes next to a shared pod, nothing restarting."""
    start, live = begin(s)
    tpc, n = s.topology.threads_per_core, len(s.topology.online_cpus)
    s.shared_pod("st-shared")
    pods = [s.claimed_pod("st-core", (tpc,)), s.claimed_pod("st-odd", (3,))]
    if n - tpc - 3 >= 3:
        pods.append(s.claimed_pod("st-multi", (1, 1)))
    grouped = s.deployment.device_mode == "grouped"
    nodes = sorted(s.topology.node_cpus)
    if grouped and len(nodes) > 1:
        # The scheduler fills the first group device; a claim for the last NUMA node's device (a CEL
        # selector) makes the driver pick CPUs for a group other than the first (multi-NUMA).
        pods.append(s.claimed_pod("st-far", (tpc,), numa_node=nodes[-1]))
    records = s.log_records()
    violations = replay(s, grants_of(pods), start, live)
    found = []
    wrong = []
    individual = s.deployment.device_mode == "individual"
    cpu_of = dracpu_slices.device_cpus(s.published()) if individual else {}
    numa: dict[str, set[int]] = {}
    for p in pods:
        want, creates = union_of(p), dracpu_log.creates_of(records, POD_NS, p.pod, "c0")
        asked = creates[0].cpus if creates else "no create"
        if asked != want or len(want) != p.requested:
            wrong.append(f"{p.pod}: allocated {format_cpulist(want)}, first create asked for {asked}")
        if individual:
            # The kubelet's own account (pod-resources List): the same devices, claim by claim.
            listed = {c: frozenset(cpu_of.get(d, -1) for d in devices)
                      for c, devices in s.pod_resource_devices(p.pod).items()}
            if listed != {c: v for c, v in p.cpus.items()}:
                wrong.append(f"{p.pod}: pod-resources lists {listed}, the allocation is {p.cpus}")
        elif grouped:
            # The allocation names group devices (NUMA nodes): the CPUs must be of those nodes.
            allowed: frozenset[int] = frozenset()
            numa[p.pod] = set()
            for claim in p.claims:
                nodes, cpus = dracpu_slices.group_node_cpus(s.get("resourceclaim", claim), s.published(), s.topology)
                numa[p.pod] |= nodes
                allowed |= cpus
            if not want <= allowed:
                wrong.append(f"{p.pod}: CPUs {format_cpulist(want)} outside its group devices' NUMA node(s) "
                             f"{sorted(numa[p.pod])} ({format_cpulist(allowed)})")
    also = {p.pod: "; pod-resources lists the same devices" if individual else
            f"; on NUMA node(s) {sorted(numa.get(p.pod, ()))}, those of its group devices" for p in pods}
    found.append(Finding("CLAIM-501", FAIL if wrong else PASS, "steady", wrong or [
        f"{p.pod}: claims {', '.join(f'{c}={format_cpulist(v)}' for c, v in p.cpus.items())}; "
        "the container's create asked for exactly their union" + also[p.pod] for p in pods]))
    claimed = [v for v in violations if v.claimed]
    all_cpus = [c for p in pods for c in union_of(p)]
    api_overlap = len(all_cpus) != len(set(all_cpus))
    found.append(Finding("CLAIM-502", FAIL if claimed or api_overlap else PASS, "steady",
                         summarize(claimed) + (["allocations overlap in the API server"] if api_overlap else [])
                         or [f"{len(pods)} claimed containers, pairwise disjoint at every recorded create/update"]))
    shared = [v for v in violations if not v.claimed]
    found.append(Finding("ACCT-501", FAIL if shared else PASS, "steady", summarize(shared) or [
        "every unclaimed container's create/update after each grant was disjoint from it"]))
    split = dracpu_slices.split_cores(s.topology, union_of(pods[0]))
    found.append(Finding("CLAIM-504", FAIL if split else PASS, "steady", [
        f"claim of {tpc} CPUs on an empty node got {format_cpulist(union_of(pods[0]))}" +
        (f": partial cores {[format_cpulist(c) for c in split]}" if split else ": one whole core")]))
    # LAT-501 is judged at the end of the run (dracpu_latency.preparation_latency): every preparation counts.
    s.start_spans = start_spans(s, [p.pod for p in pods])
    s.cleanup(["st-shared"] + [p.pod for p in pods], [c for p in pods for c in p.claims])
    return found


def _seconds(pod: dict, frm: str, to: str) -> float | None:
    times = {c["type"]: c.get("lastTransitionTime") for c in pod["status"].get("conditions", [])}
    if not times.get(frm) or not times.get(to):
        return None
    parse = lambda t: datetime.fromisoformat(t.replace("Z", "+00:00"))  # noqa: E731
    return (parse(times[to]) - parse(times[frm])).total_seconds()


def start_spans(s: DraCpuSession, pods: list[str]) -> dict[str, float | None]:
    """Scheduled-to-ready per pod (1 s resolution of pod conditions), for LAT-501's figures."""
    return {name: _seconds(s.get("pod", name), "PodScheduled", "Ready") for name in pods}


def shared_claim(s: DraCpuSession) -> list[Finding]:
    """A second pod that consumes a claim another pod's container already consumes."""
    first = s.claimed_pod("sc-owner", (1,))
    claim = first.claims[0]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sc-thief", "namespace": POD_NS},
           "spec": {"nodeSelector": {"kubernetes.io/hostname": s.node}, "terminationGracePeriodSeconds": 0,
                    "resourceClaims": [{"name": "r0", "resourceClaimName": claim}],
                    "containers": [{"name": "c0", "image": s.pause(), "imagePullPolicy": "Never",
                                    "resources": {"claims": [{"name": "r0"}]}}]}}
    s.apply(pod)

    def settled():
        status = s.get("pod", "sc-thief")["status"]
        for c in status.get("containerStatuses", []):
            if c.get("state", {}).get("running"):
                return "running"
            waiting = c.get("state", {}).get("waiting", {})
            if waiting.get("reason") in ("CreateContainerError", "RunContainerError"):
                return f"{waiting['reason']}: {waiting.get('message', '')[:200]}"
        return None
    try:
        outcome = wait_for(settled, timeout=90, interval=1.0, what="the second consumer to run or be refused")
    except WaitTimeout:
        outcome = f"neither running nor refused after 90 s; events: {s.pod_events('sc-thief')[-3:]}"
    creates = dracpu_log.creates_of(s.log_records(), POD_NS, "sc-thief", "c0")
    stole = [r for r in creates if r.cpus is None or r.cpus & first.cpus[claim]]
    ok = outcome != "running" and not stole
    found = Finding("CLAIM-503", PASS if ok else FAIL, "shared-claim",
                    [f"claim {claim} ({format_cpulist(first.cpus[claim])}) owned by sc-owner; second consumer: "
                     f"{outcome}", f"{len(creates)} recorded creates of the second consumer"])
    s.cleanup(["sc-thief", "sc-owner"], list(first.claims))
    return [found]


def fill(s: DraCpuSession) -> list[int]:
    """Claim sizes that take every CPU the driver manages.

    `individual`: within the per-claim device cap. `grouped`: one claim per group device (a NUMA
    node), each for that node's CPUs, because a claim takes capacity of one device only.
    """
    reserved = frozenset(s.deployment.reserved_cpus)
    if s.deployment.device_mode == "grouped":
        return [n for n in (len(frozenset(node.cpus) - reserved) for node in s.topology.nodes) if n]
    return fill_counts(len(s.topology.online_cpus) - len(reserved))


def empty_shared_pool(s: DraCpuSession) -> list[Finding]:
    """Claim every CPU the driver manages, then create a shared pod."""
    start, live = begin(s)
    full = s.claimed_pod("es-full", tuple(fill(s)), timeout=180)
    s.shared_pod("es-shared", wait=False)
    try:
        s.wait_running("es-shared", timeout=60)
        state = "running"
    except WaitTimeout:
        state = f"not running after 60 s; events: {s.pod_events('es-shared')[-2:]}"
    everything = replay(s, grants_of([full]), start, live)
    violations = [v for v in everything if v.container[1] == "es-shared"]
    evidence = [f"es-full holds {format_cpulist(union_of(full))} (every CPU the driver manages)",
                f"es-shared: {state}"] + summarize(violations)
    others = {v.container for v in everything if v.container[1] != "es-shared"}
    if others:
        evidence.append(f"also on the claim's CPUs meanwhile (already running): {sorted(others)}")
    found = [Finding("ACCT-502", FAIL if violations else PASS, "empty-shared-pool", evidence)]
    s.cleanup(["es-shared", "es-full"], list(full.claims))
    return found
