"""ROBUST-502 on kind: dra-driver-cpu on a worker whose kubelet runs the static CPU manager policy."""

from __future__ import annotations

from ..cpuset import format_cpulist
from ..node.cpumanager import loads
from ..node.profile import parse_config
from ..topology import library
from ..waiting import WaitTimeout, wait_for
from . import dracpu_log
from .cluster.config import ClusterPlan, NodePlan
from .cluster.node_access import STATE_PATH
from .dracpu_pods import NAMESPACE as POD_NS
from .dracpu_scenarios import FAIL, PASS, Finding
from .dracpu_session import DraCpuSession

# The kubelet re-applies its own cpusets to every container on its reconcile loop
# (cpu_manager reconcileState, every --cpu-manager-reconcile-period, default 10 s).
RECONCILE_WAIT_S = 25
PROFILE = {"mode": "coexistence", "cpuManagerPolicy": "static", "reservedSystemCPUs": "0", "cci": False}
# Words a refusal must use to name the conflicting policy (the requirement's "clear reason").
POLICY_WORDS = ("static", "cpu manager", "cpumanager", "cpu-manager-policy")


def cluster_plan(name: str, topology_name: str, image: str) -> ClusterPlan:
    return ClusterPlan(name, image, [NodePlan("control-plane"),
                                     NodePlan("worker", library.resolve(topology_name), parse_config(PROFILE))])


def _guaranteed(name: str, node: str, image: str) -> dict:
    res = {"cpu": "1", "memory": "64Mi"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": POD_NS},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c0", "image": image, "imagePullPolicy": "Never",
                                     "resources": {"requests": res, "limits": res}}]}}


def coexistence(s: DraCpuSession) -> list[Finding]:
    """A kubelet-pinned Guaranteed pod and a claimed pod side by side; who ends up where, or who says no."""
    s.apply(_guaranteed("co-kubelet", s.node, s.pause()))
    s.wait_running("co-kubelet")
    evidence: list[str] = []
    try:
        held = s.claimed_pod("co-claim", (s.topology.threads_per_core,), timeout=90)
    except WaitTimeout:
        events = s.pod_events("co-claim")
        named = any(w in e.lower() for e in events for w in POLICY_WORDS)
        evidence = [f"claimed pod refused; events: {events[-3:]}",
                    "the refusal names the CPU manager policy" if named else "the refusal names no CPU manager policy"]
        s.cleanup(["co-kubelet", "co-claim"], ["co-claim-c0"])
        return [Finding("ROBUST-502", PASS if named else FAIL, "static-policy", evidence)]
    claim_cpus = frozenset().union(*held.cpus.values())
    state = loads(s.node_exec("cat", STATE_PATH).encode(), path=STATE_PATH)
    pinned = frozenset(c for entries in state.entries.values() for cpus in entries.values() for c in cpus)
    creates = dracpu_log.creates_of(s.log_records(), POD_NS, "co-claim", "c0")
    cid = creates[-1].container_id if creates else ""

    def moved():
        last = dracpu_log.last_cpus(s.log_records(), cid)
        return last if last != claim_cpus else None
    try:
        after = wait_for(moved, timeout=RECONCILE_WAIT_S, interval=1.0, what="a cpuset change of co-claim")
    except WaitTimeout:
        after = claim_cpus
    evidence = [f"claim got {format_cpulist(claim_cpus)}; kubelet-pinned (cpu_manager_state) "
                f"{format_cpulist(pinned)}, kubelet default set {format_cpulist(state.default_cpuset)}"]
    problems = []
    if claim_cpus & pinned:
        problems.append(f"the claim shares {format_cpulist(claim_cpus & pinned)} with a kubelet-pinned container")
    if after != claim_cpus:
        shown = "every CPU" if after is None else format_cpulist(after)
        problems.append(f"within {RECONCILE_WAIT_S} s the claimed container was moved to {shown} (the kubelet's "
                        "reconcile loop re-applies its own cpuset)")
    both = claim_cpus & state.default_cpuset
    if both:
        # The kubelet pins every non-Guaranteed container to its default set and re-applies it.
        problems.append(f"the kubelet's shared pool (default set) still holds the claim's {format_cpulist(both)}")
    s.cleanup(["co-kubelet", "co-claim"], list(held.claims))
    return [Finding("ROBUST-502", FAIL if problems else PASS, "static-policy", evidence + problems)]
