"""The dra-cpu restart scenarios: a claimed container restarts, the driver is away or restarts."""

from __future__ import annotations

from ..cpuset import format_cpulist
from ..waiting import WaitTimeout, wait_for
from . import dracpu_log, dracpu_pods
from .dracpu_pods import NAMESPACE as POD_NS
from .dracpu_scenarios import FAIL, PASS, Finding, begin, grants_of, is_driver, replay, summarize, union_of
from .dracpu_session import ClaimedPod, DraCpuSession


def container_restart(s: DraCpuSession) -> list[Finding]:
    """Kill a claimed container; the kubelet restarts it in the same pod (its claim stays prepared)."""
    start, live = begin(s)
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
    violations = replay(s, grants_of([held, after]), start, live)
    creates = dracpu_log.creates_of(records, POD_NS, "cr-held", "c0")
    want = union_of(held)
    again = [r.cpus for r in creates[1:]]
    shared = [v for v in violations if not v.claimed and v.grant in held.cpus]
    clash = union_of(after) & want
    evidence = [f"cr-held claim {format_cpulist(want)}; creates asked for "
                f"{[('every CPU' if c is None else format_cpulist(c)) for c in [r.cpus for r in creates]]}"]
    evidence += summarize(shared)
    if clash:
        evidence.append(f"claim prepared after the restart got {format_cpulist(clash)} of cr-held's CPUs")
    ok = len(creates) >= 2 and all(c == want for c in again) and not shared and not clash
    found = [Finding("RESTART-501", PASS if ok else FAIL, "container-restart", evidence)]
    # The same records judged by the steady-state requirements: the shared pool after the restart
    # (ACCT-501) and the claim prepared after it (CLAIM-502).
    found.append(Finding("ACCT-501", FAIL if shared else PASS, "container-restart", summarize(shared) or [
        "no unclaimed container was asked for the restarted container's CPUs"]))
    claimed = [v for v in violations if v.claimed]
    found.append(Finding("CLAIM-502", FAIL if clash or claimed else PASS, "container-restart", summarize(claimed) + (
        [f"the claim prepared after the restart got {format_cpulist(clash)}"] if clash else []) or [
        f"the claim prepared after the restart got {format_cpulist(union_of(after))}, disjoint from "
        f"{format_cpulist(want)}"]))
    s.cleanup(["cr-shared", "cr-held", "cr-after"], list(held.claims + after.claims))
    return found


def driver_down(s: DraCpuSession) -> list[Finding]:
    """Take the driver away, create a shared pod, bring the driver back."""
    start, live = begin(s)
    held = s.claimed_pod("dd-held", (s.topology.threads_per_core,))
    s.pause_driver()
    s.checkpoint()
    s.shared_pod("dd-orphan")
    s.resume_driver()
    grants = grants_of([held])

    def reconciled():
        creates = dracpu_log.creates_of(s.log_records(), POD_NS, "dd-orphan", "c0")
        last = dracpu_log.last_cpus(s.log_records(), creates[-1].container_id) if creates else None
        return last is not None and not (last & union_of(held)) and last
    try:
        moved = wait_for(reconciled, timeout=60, interval=1.0, what="dd-orphan moved off the claim")
        after = f"after the driver returned it was moved to {format_cpulist(moved)}"
    except WaitTimeout:
        after = "60 s after the driver returned it still overlapped the claim (or had no cpuset)"
    violations = [v for v in replay(s, grants, start, live) if v.container[1] == "dd-orphan"]
    evidence = [f"dd-held claim {format_cpulist(union_of(held))}"] + summarize(violations) + [after]
    found = [Finding("RESTART-502", FAIL if violations or "still" in after else PASS, "driver-down", evidence)]
    s.cleanup(["dd-orphan", "dd-held"], list(held.claims))
    return found


def driver_restart(s: DraCpuSession) -> list[Finding]:
    """Restart the driver pod while a claimed and a shared container run; then a new shared pod and claim."""
    start, live = begin(s)
    tpc = s.topology.threads_per_core
    s.shared_pod("dr-shared")
    held = s.claimed_pod("dr-held", (tpc,))
    s.restart_driver()
    s.checkpoint()
    s.shared_pod("dr-shared2")
    after = s.claimed_pod("dr-after", (tpc,))
    violations = replay(s, grants_of([held, after]), start, live)
    own = [v for v in violations if is_driver(v)]
    others = [v for v in violations if not is_driver(v)]
    clash = union_of(after) & union_of(held)
    evidence = [f"dr-held {format_cpulist(union_of(held))}, dr-after {format_cpulist(union_of(after))}"]
    evidence += summarize(others)
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
    start, live = begin(s)
    s.shared_pod("dp-shared")
    count = s.topology.threads_per_core
    s.apply(dracpu_pods.claim("dp-late-c0", count, grouped=s.deployment.device_mode == "grouped"),
            dracpu_pods.pod("dp-late", s.node, s.pause(), ("dp-late-c0",), wait_first=True))
    init = wait_for(lambda: next((c["containerID"].split("://")[-1] for c in
                                  s.get("pod", "dp-late")["status"].get("initContainerStatuses", [])
                                  if c.get("state", {}).get("running")), None),
                    timeout=120, interval=1.0, what="dp-late's init container running (its claim prepared)")
    s.restart_driver()
    s.checkpoint()
    s.node_exec("crictl", "stop", "--timeout", "10", init)  # the init container exits 0 on SIGTERM
    s.checkpoint()  # from here the init container is gone: its last cpuset no longer counts
    s.wait_running("dp-late")
    late = ClaimedPod("dp-late", ("dp-late-c0",), s.claim_cpus("dp-late", ("dp-late-c0",)), count)
    violations = [v for v in replay(s, grants_of([late]), start, live) if not is_driver(v)]
    evidence = [f"dp-late's claim {format_cpulist(union_of(late))} was prepared before the driver restart, its "
                "container created after it"] + summarize(violations)
    found = [Finding("RESTART-503", FAIL if violations else PASS, "driver-restart-prepared", evidence)]
    s.cleanup(["dp-shared", "dp-late"], ["dp-late-c0"])
    return found
