"""Latency budgets: NodePrepareResources from the kubelet's own histogram, claimed pod start against the SLO."""

from __future__ import annotations

import math

import pytest

from cci_conformance.certify.measuring import measuring_alone
from cci_conformance.dra.api import PodSpec
from cci_conformance.dra.checks import need_offered

# at least this many preparations before a percentile of the kubelet's histogram means anything
MIN_PREPARATIONS = 100
# Pods are created one at a time, each running before the next (its NodePrepareResources alone, as the budget is
# meant), and deleted DELETE_BATCH at a time: a deletion waits for the kubelet's whole pod stop, which no
# preparation overlaps since the next pod comes once they are gone (docs/spec-dra.md S5.5).
DELETE_BATCH = 4
PREPARE_P99_S = 0.1  # the smallest bucket of DRADurationBuckets: a p99 within it is within 100 ms
POD_START_P99_S = 5.0  # pod startup SLO (sig-scalability pod_startup_latency.md): p99 <= 5 s
# The kubelet times calls and pod starts by the wall clock, and a kind node's processes share the host's CPUs: over
# this many runnable tasks per CPU (5-min load average) a task waits about as long as it runs, so a figure over
# budget measured the host's run queue. Then the requirement is untested with the load named, never failed for it;
# a pass stays a pass (within budget even there).
HOST_MAX_LOAD_PER_CPU = 2.0


@pytest.mark.requirement("LAT-601")
def test_node_prepare_p99_within_budget(dra, record_figure):
    """NodePrepareResources MUST answer within 100 ms at p99 over at least 100 preparations (kubelet histogram),
    and claimed pods MUST start within 5 s at p99."""
    dra.require("metrics")
    need_offered(dra, 1)
    held = max(1, min(DELETE_BATCH, len(dra.topology.online_cpus - dra.profile.reserved) - 1))
    with measuring_alone():  # beside no other worker's test: the kubelet's wall clock shares the host's CPUs
        _measure(dra, held, record_figure)


def _measure(dra, held: int, record_figure) -> None:
    before = dra.metrics().node_prepare
    starts, slow, live = [], [], []
    for i in range(MIN_PREPARATIONS):
        pod = dra.create_pod(PodSpec.claimed(f"lat-{i}", 1))
        live.append(pod.name)
        starts.append(pod.scheduled_to_ready_s)
        if pod.scheduled_to_ready_s is not None and pod.scheduled_to_ready_s > POD_START_P99_S and len(slow) < 2:
            # why it was slow, in the kubelet's words (e.g. a FailedPrepareDynamicResources retried with backoff)
            slow.append(f"{pod.name} {pod.scheduled_to_ready_s} s: {'; '.join(pod.events[:3])}")
        if len(live) == held or i == MIN_PREPARATIONS - 1:
            dra.delete_pods(live)
            live = []
    after = dra.metrics()
    calls = after.node_prepare.minus(before)
    if calls.count < MIN_PREPARATIONS:
        pytest.skip(f"the kubelet timed {calls.count} NodePrepareResources calls, at least {MIN_PREPARATIONS} needed")
    p50, p99 = calls.quantile_bound(0.5), calls.quantile_bound(0.99)
    timed = sorted(s for s in starts if s is not None)
    start_p99 = timed[int(0.99 * (len(timed) - 1))] if timed else None
    # the histogram gives bucket bounds, not values: "p99 <= 0.1 s" is what the kubelet's own buckets can say
    mean = calls.total / calls.count if calls.count else None
    for name, value, budget in (("node_prepare_mean", mean, None), ("node_prepare_p50_le", p50, None),
                                ("node_prepare_p99_le", p99, PREPARE_P99_S),
                                ("claimed_pod_start_p99", start_p99, POD_START_P99_S)):
        if value is not None and math.isfinite(value):
            record_figure(name, value, "s", budget=budget, samples=timed if name.startswith("claimed") else None)
    record_figure("node_prepare_calls", calls.count)
    load = after.host_load_per_cpu
    if load is not None:
        record_figure("host_load_per_cpu", load)
    over = [what for what, value, budget in (("NodePrepareResources p99", p99, PREPARE_P99_S),
                                             ("claimed pod start p99", start_p99, POD_START_P99_S))
            if value is None or value > budget]
    if over and load is not None and load > HOST_MAX_LOAD_PER_CPU:
        pytest.skip(f"{' and '.join(over)} over budget (p99 <= {p99} s, pod start p99 {start_p99} s), but the host "
                    f"ran {load:g} runnable tasks per CPU (5-min load average), over {HOST_MAX_LOAD_PER_CPU:g}: the "
                    "kubelet's wall clock measured the host's run queue, not the driver")
    assert p99 is not None and p99 <= PREPARE_P99_S, \
        f"NodePrepareResources p50 <= {p50} s, p99 <= {p99} s over {calls.count} calls (budget {PREPARE_P99_S} s)"
    assert start_p99 is not None and start_p99 <= POD_START_P99_S, \
        f"claimed pod start p99 {start_p99} s over {len(timed)} pods (SLO {POD_START_P99_S} s); " \
        f"first over the SLO: {slow}"
