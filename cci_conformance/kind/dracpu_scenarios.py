"""The dra-cpu scenarios on one kind worker: drive pods and claims, then judge requirements from the records."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from ..cpuset import format_cpulist
from ..waiting import WaitTimeout, wait_for
from . import dracpu_log, dracpu_pods, dracpu_slices
from .dracpu_log import Grant, Replay
from .dracpu_manifests import APP, NAMESPACE
from .dracpu_pods import NAMESPACE as POD_NS
from .dracpu_pods import fill_counts
from .dracpu_session import ClaimedPod, DraCpuSession

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"


@dataclass
class Finding:
    requirement: str
    verdict: str
    scenario: str
    evidence: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"requirement": self.requirement, "verdict": self.verdict, "scenario": self.scenario,
                "evidence": self.evidence}


def _grants(pods: list[ClaimedPod], end: int | None = None) -> list[Grant]:
    return [Grant(claim, POD_NS, p.pod, "c0", cpus, end) for p in pods for claim, cpus in p.cpus.items()]


def _union(p: ClaimedPod) -> frozenset[int]:
    return frozenset().union(*p.cpus.values())


def _is_driver(v: dracpu_log.Violation) -> bool:
    return v.container[0] == NAMESPACE and v.container[1].startswith(APP)


def _replay(s: DraCpuSession, grants: list[Grant], start: int, live: set[str]) -> list[dracpu_log.Violation]:
    s.checkpoint()
    records = s.log_records()
    gone = dracpu_log.gone_from_checkpoints(records, s.checkpoints)
    return Replay(grants, gone).run(records, start, live)


def _begin(s: DraCpuSession) -> tuple[int, set[str]]:
    s.checkpoint()
    return len(s.log_records()), s.running_ids()


def _describe(violations: list[dracpu_log.Violation], limit: int = 4) -> list[str]:
    lines = [v.describe() for v in violations[:limit]]
    return lines + ([f"... and {len(violations) - limit} more"] if len(violations) > limit else [])


def registration(s: DraCpuSession) -> list[Finding]:
    published = s.published()
    ok = s.ready_seconds is not None and bool(published)
    evidence = [f"DaemonSet pod Ready and ResourceSlices published {s.ready_seconds:.1f} s after apply "
                f"(deadline 180 s)", f"{len(published)} devices in the slices of {s.node}"]
    found = [Finding("REG-501", PASS if ok else FAIL, "deploy", evidence)]
    problems = dracpu_slices.mismatches(s.topology, published, s.deployment.reserved_cpus)
    found.append(Finding("ROBUST-501", FAIL if problems else PASS, "deploy",
                         problems[:6] or [f"{len(published)} devices: CPU ids, numaNodeID, socketID, coreID, "
                                          f"coreType, cacheL3ID, smtEnabled all as the rendered sysfs"]))
    return found


def steady(s: DraCpuSession) -> list[Finding]:
    """Claims of different sizes next to a shared pod, nothing restarting."""
    start, live = _begin(s)
    tpc, n = s.topology.threads_per_core, len(s.topology.online_cpus)
    s.shared_pod("st-shared")
    pods = [s.claimed_pod("st-core", (tpc,)), s.claimed_pod("st-odd", (3,))]
    if n - tpc - 3 >= 3:
        pods.append(s.claimed_pod("st-multi", (1, 1)))
    records = s.log_records()
    violations = _replay(s, _grants(pods), start, live)
    found = []
    wrong = []
    for p in pods:
        want, creates = _union(p), dracpu_log.creates_of(records, POD_NS, p.pod, "c0")
        asked = creates[0].cpus if creates else "no create"
        if asked != want or len(want) != sum(len(c) for c in p.cpus.values()):
            wrong.append(f"{p.pod}: allocated {format_cpulist(want)}, first create asked for {asked}")
    found.append(Finding("CLAIM-501", FAIL if wrong else PASS, "steady", wrong or [
        f"{p.pod}: claims {', '.join(f'{c}={format_cpulist(v)}' for c, v in p.cpus.items())}; "
        "the container's create asked for exactly their union" for p in pods]))
    claimed = [v for v in violations if v.claimed]
    all_cpus = [c for p in pods for c in _union(p)]
    api_overlap = len(all_cpus) != len(set(all_cpus))
    found.append(Finding("CLAIM-502", FAIL if claimed or api_overlap else PASS, "steady",
                         _describe(claimed) + (["allocations overlap in the API server"] if api_overlap else [])
                         or [f"{len(pods)} claimed containers, pairwise disjoint at every recorded create/update"]))
    shared = [v for v in violations if not v.claimed]
    found.append(Finding("ACCT-501", FAIL if shared else PASS, "steady", _describe(shared) or [
        "every unclaimed container's create/update after each grant was disjoint from it"]))
    split = dracpu_slices.split_cores(s.topology, _union(pods[0]))
    found.append(Finding("CLAIM-504", FAIL if split else PASS, "steady", [
        f"claim of {tpc} CPUs on an empty node got {format_cpulist(_union(pods[0]))}" +
        (f": partial cores {[format_cpulist(c) for c in split]}" if split else ": one whole core")]))
    found.append(latency(s, [p.pod for p in pods]))
    s.cleanup(["st-shared"] + [p.pod for p in pods], [c for p in pods for c in p.claims])
    return found


def _seconds(pod: dict, frm: str, to: str) -> float | None:
    times = {c["type"]: c.get("lastTransitionTime") for c in pod["status"].get("conditions", [])}
    if not times.get(frm) or not times.get(to):
        return None
    parse = lambda t: datetime.fromisoformat(t.replace("Z", "+00:00"))  # noqa: E731
    return (parse(times[to]) - parse(times[frm])).total_seconds()


def latency(s: DraCpuSession, pods: list[str]) -> Finding:
    """Scheduled-to-ready per claimed pod (1 s resolution) and the kubelet's PrepareResources histogram."""
    spans = {name: _seconds(s.get("pod", name), "PodScheduled", "Ready") for name in pods}
    metric = [line for line in s.kubelet_metric("dra_operations_duration_seconds")
              if "PrepareResources" in line and ("_sum" in line or "_count" in line)]
    evidence = [f"scheduled->ready: {', '.join(f'{k} {v}s' for k, v in spans.items())}"] + metric[:4]
    # No kind latency budget is set yet (docs/dra-cpu.md): the figures are reported, not judged.
    return Finding("LAT-501", INCONCLUSIVE, "steady", evidence + ["no dra-cpu budget on kind yet: measured only"])


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


def container_restart(s: DraCpuSession) -> list[Finding]:
    """Kill a claimed container; the kubelet restarts it in the same pod (its claim stays prepared)."""
    start, live = _begin(s)
    tpc = s.topology.threads_per_core
    s.shared_pod("cr-shared")
    held = s.claimed_pod("cr-held", (tpc,))
    first = s.get("pod", "cr-held")["status"]["containerStatuses"][0]["containerID"].split("://")[-1]
    s.stop_container(first)
    wait_for(lambda: s.get("pod", "cr-held")["status"]["containerStatuses"][0].get("restartCount", 0) >= 1
             and s.get("pod", "cr-held")["status"]["containerStatuses"][0]["state"].get("running"),
             timeout=120, interval=1.0, what="cr-held's container restarted")
    after = s.claimed_pod("cr-after", (tpc,))
    records = s.log_records()
    violations = _replay(s, _grants([held, after]), start, live)
    creates = dracpu_log.creates_of(records, POD_NS, "cr-held", "c0")
    want = _union(held)
    again = [r.cpus for r in creates[1:]]
    shared = [v for v in violations if not v.claimed and v.grant in held.cpus]
    clash = _union(after) & want
    evidence = [f"cr-held claim {format_cpulist(want)}; creates asked for "
                f"{[('every CPU' if c is None else format_cpulist(c)) for c in [r.cpus for r in creates]]}"]
    evidence += _describe(shared)
    if clash:
        evidence.append(f"claim prepared after the restart got {format_cpulist(clash)} of cr-held's CPUs")
    ok = len(creates) >= 2 and all(c == want for c in again) and not shared and not clash
    found = [Finding("RESTART-501", PASS if ok else FAIL, "container-restart", evidence)]
    # The same records judged by the steady-state requirements: the shared pool after the restart
    # (ACCT-501) and the claim prepared after it (CLAIM-502).
    found.append(Finding("ACCT-501", FAIL if shared else PASS, "container-restart", _describe(shared) or [
        "no unclaimed container was asked for the restarted container's CPUs"]))
    claimed = [v for v in violations if v.claimed]
    found.append(Finding("CLAIM-502", FAIL if clash or claimed else PASS, "container-restart", _describe(claimed) + (
        [f"the claim prepared after the restart got {format_cpulist(clash)}"] if clash else []) or [
        f"the claim prepared after the restart got {format_cpulist(_union(after))}, disjoint from "
        f"{format_cpulist(want)}"]))
    s.cleanup(["cr-shared", "cr-held", "cr-after"], list(held.claims + after.claims))
    return found


def driver_down(s: DraCpuSession) -> list[Finding]:
    """Take the driver away, create a shared pod, bring the driver back."""
    start, live = _begin(s)
    held = s.claimed_pod("dd-held", (s.topology.threads_per_core,))
    s.pause_driver()
    s.checkpoint()
    s.shared_pod("dd-orphan")
    s.resume_driver()
    grants = _grants([held])

    def reconciled():
        creates = dracpu_log.creates_of(s.log_records(), POD_NS, "dd-orphan", "c0")
        last = dracpu_log.last_cpus(s.log_records(), creates[-1].container_id) if creates else None
        return last is not None and not (last & _union(held)) and last
    try:
        moved = wait_for(reconciled, timeout=60, interval=1.0, what="dd-orphan moved off the claim")
        after = f"after the driver returned it was moved to {format_cpulist(moved)}"
    except WaitTimeout:
        after = "60 s after the driver returned it still overlapped the claim (or had no cpuset)"
    violations = [v for v in _replay(s, grants, start, live) if v.container[1] == "dd-orphan"]
    evidence = [f"dd-held claim {format_cpulist(_union(held))}"] + _describe(violations) + [after]
    found = [Finding("RESTART-502", FAIL if violations or "still" in after else PASS, "driver-down", evidence)]
    s.cleanup(["dd-orphan", "dd-held"], list(held.claims))
    return found


def driver_restart(s: DraCpuSession) -> list[Finding]:
    """Restart the driver pod while a claimed and a shared container run; then a new shared pod and claim."""
    start, live = _begin(s)
    tpc = s.topology.threads_per_core
    s.shared_pod("dr-shared")
    held = s.claimed_pod("dr-held", (tpc,))
    s.restart_driver()
    s.checkpoint()
    s.shared_pod("dr-shared2")
    after = s.claimed_pod("dr-after", (tpc,))
    violations = _replay(s, _grants([held, after]), start, live)
    own = [v for v in violations if _is_driver(v)]
    others = [v for v in violations if not _is_driver(v)]
    clash = _union(after) & _union(held)
    evidence = [f"dr-held {format_cpulist(_union(held))}, dr-after {format_cpulist(_union(after))}"]
    evidence += _describe(others)
    if clash:
        evidence.append(f"the claim prepared after the restart got {format_cpulist(clash)} of dr-held's CPUs")
    if own:
        evidence.append("not counted here (RESTART-502's case): the new driver container itself, created before its "
                        "NRI plugin connects: " + own[0].describe())
    found = [Finding("RESTART-503", FAIL if others or clash else PASS, "driver-restart", evidence)]
    s.cleanup(["dr-shared", "dr-shared2", "dr-held", "dr-after"], list(held.claims + after.claims))
    return found


def driver_restart_prepared(s: DraCpuSession) -> list[Finding]:
    """Restart the driver between a claim's preparation and its container's creation."""
    start, live = _begin(s)
    s.shared_pod("dp-shared")
    count = s.topology.threads_per_core
    s.apply(dracpu_pods.claim("dp-late-c0", count),
            dracpu_pods.pod("dp-late", s.node, s.pause(), ("dp-late-c0",), wait_first=True))
    init = wait_for(lambda: next((c["containerID"].split("://")[-1] for c in
                                  s.get("pod", "dp-late")["status"].get("initContainerStatuses", [])
                                  if c.get("state", {}).get("running")), None),
                    timeout=120, interval=1.0, what="dp-late's init container running (its claim prepared)")
    s.restart_driver()
    s.checkpoint()
    s.node_exec("crictl", "stop", "--timeout", "10", init)  # the init container exits 0 on SIGTERM
    s.wait_running("dp-late")
    cpu_of = dracpu_slices.device_cpus(s.published())
    late = ClaimedPod("dp-late", ("dp-late-c0",),
                      {"dp-late-c0": dracpu_slices.allocated_cpus(s.get("resourceclaim", "dp-late-c0"), cpu_of)})
    violations = [v for v in _replay(s, _grants([late]), start, live) if not _is_driver(v)]
    evidence = [f"dp-late's claim {format_cpulist(_union(late))} was prepared before the driver restart, its "
                "container created after it"] + _describe(violations)
    found = [Finding("RESTART-503", FAIL if violations else PASS, "driver-restart-prepared", evidence)]
    s.cleanup(["dp-shared", "dp-late"], ["dp-late-c0"])
    return found


def empty_shared_pool(s: DraCpuSession) -> list[Finding]:
    """Claim every CPU the driver manages, then create a shared pod."""
    start, live = _begin(s)
    managed = len(s.topology.online_cpus) - len(s.deployment.reserved_cpus)
    full = s.claimed_pod("es-full", tuple(fill_counts(managed)), timeout=180)
    s.shared_pod("es-shared", wait=False)
    try:
        s.wait_running("es-shared", timeout=60)
        state = "running"
    except WaitTimeout:
        state = f"not running after 60 s; events: {s.pod_events('es-shared')[-2:]}"
    everything = _replay(s, _grants([full]), start, live)
    violations = [v for v in everything if v.container[1] == "es-shared"]
    evidence = [f"es-full holds {format_cpulist(_union(full))} (every CPU the driver manages)",
                f"es-shared: {state}"] + _describe(violations)
    others = {v.container for v in everything if v.container[1] != "es-shared"}
    if others:
        evidence.append(f"also on the claim's CPUs meanwhile (already running): {sorted(others)}")
    found = [Finding("ACCT-502", FAIL if violations else PASS, "empty-shared-pool", evidence)]
    s.cleanup(["es-shared", "es-full"], list(full.claims))
    return found


SCENARIOS = (steady, shared_claim, container_restart, driver_restart, driver_restart_prepared, driver_down,
             empty_shared_pool)
