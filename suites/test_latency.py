"""Admission latency against the latency profile: p50/p99, serial throughput, growth with load and machine size."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

import pytest
from claimkit import available_now, claim_pod, exclusive, group, params, shared

from cci_conformance.certify.budgets import percentile
from cci_conformance.certify.settings import load_topology

EMPTY_CYCLES = 10  # admit + remove cycles on the empty node
LOADED_MIN = 20  # admissions on the filled node


@dataclass
class Measurement:
    """Driver time per admission (AdmissionResult.driver_seconds, the part the driver answers for)."""

    empty: list[float] = field(default_factory=list)
    fill: list[float] = field(default_factory=list)
    loaded: list[float] = field(default_factory=list)
    fill_wall_s: float = 0.0
    fill_admissions: int = 0
    held_fraction: float = 0.0
    target_fraction: float = 0.0  # the profile's fill fraction, rounded down to whole CPUs

    @property
    def all(self) -> list[float]:
        return self.empty + self.fill + self.loaded


def mixed_claims(topology):
    """The fill mix: exclusive claims of 1-4 CPUs (some denying siblings) between shared ones.

    Attribute semantics are the claims suite's business; the mix only has to be realistic in size and shape."""
    denied = ["CORE-SIBLING-DENIED"] if topology.threads_per_core > 1 else []
    mix = [exclusive(2), shared(2), exclusive(1), exclusive(4),
           params(group(2, "EXCLUSIVE", *denied)), exclusive(3), shared(1)]
    return itertools.cycle(mix)


def admit(session, parameters, samples: list[float]):
    result = session.create_pod(claim_pod(parameters))
    assert result.admitted, f"{parameters} refused during the latency run: {result.reason}: {result.message}"
    samples.append(result.driver_seconds)
    return result


def measure(session, topology, budgets) -> Measurement:
    """Empty-node cycles, a fill to the profile's fraction with mixed claims, then cycles on the filled node."""
    m = Measurement()
    small = itertools.cycle([exclusive(1), shared(2), exclusive(2)])
    for _ in range(EMPTY_CYCLES):
        session.delete_pod(admit(session, next(small), m.empty).containers[0].pod_uid)
    snap = session.snapshot()
    allocatable = len(snap.online - snap.reserved)
    target = int(allocatable * budgets.fill_fraction)
    claims = mixed_claims(topology)


    start = time.perf_counter()
    free = allocatable
    while allocatable - free < target:
        parameters = next(claims)
        need = sum(int(c) for c in parameters["cores"]) * topology.threads_per_core
        if need > free - 2:
            parameters = exclusive(1) if parameters["cpu attributes"][0][0] == "EXCLUSIVE" else shared(1)
        admit(session, parameters, m.fill)
        free = len(available_now(session.snapshot()))
    m.fill_wall_s = time.perf_counter() - start
    m.fill_admissions = len(m.fill)
    m.held_fraction = (allocatable - len(available_now(session.snapshot()))) / allocatable
    m.target_fraction = target / allocatable
    # Shared claims keep adding live admissions without using up CPUs: the load only grows.
    while len(m.loaded) < LOADED_MIN or len(m.all) < budgets.min_samples:
        admit(session, shared(1), m.loaded)
    return m


_CACHE: dict[str, Measurement] = {}


@pytest.fixture(scope="module")
def latency(cci_shared_nodes, node_profile, topology, driver_manifest, budgets) -> Measurement:
    """One measurement per topology on a node of its own (closed afterwards: cheaper than a hundred deletions)."""
    session = cci_shared_nodes.get(topology, "latency", node_profile, driver_manifest.path)
    try:
        m = measure(session, topology, budgets)
    finally:
        cci_shared_nodes.discard((topology.name, "latency"))
    _CACHE[topology.name] = m
    return m


def ms(samples) -> list[float]:
    return [s * 1000 for s in samples]


@pytest.mark.requirement("LAT-001")
def test_median_admission_latency_within_budget(latency, budgets, record_figure):
    """The median CCIAdmit time MUST stay within the profile's p50 budget under a realistic fill."""
    p50 = percentile(latency.all, 50)
    record_figure("admission p50", p50 * 1000, "ms", budget=budgets.p50_s * 1000, samples=ms(latency.all))
    record_figure("fill reached", latency.held_fraction * 100, "%")
    assert p50 <= budgets.p50_s, f"p50 {p50 * 1000:.2f} ms > budget {budgets.p50_s * 1000:.2f} ms"


@pytest.mark.requirement("LAT-002")
def test_p99_admission_latency_within_budget(latency, budgets, record_figure):
    """The 99th-percentile CCIAdmit time MUST stay within the profile's p99 budget under a realistic fill."""
    p99 = percentile(latency.all, 99)
    record_figure("admission p99", p99 * 1000, "ms", budget=budgets.p99_s * 1000)
    assert len(latency.all) >= budgets.min_samples
    assert p99 <= budgets.p99_s, f"p99 {p99 * 1000:.2f} ms > budget {budgets.p99_s * 1000:.2f} ms"


@pytest.mark.requirement("LAT-003")
def test_serial_fill_throughput_reaches_the_floor(latency, budgets, record_figure):
    """Filling the node to the profile's fraction with mixed claims MUST reach the serial admissions/s floor."""
    rate = latency.fill_admissions / max(sum(latency.fill), 1e-9)
    record_figure("serial admissions per second", rate, "1/s", budget=budgets.min_admissions_per_s,
                  comparison=">=")
    assert latency.held_fraction >= latency.target_fraction
    assert rate >= budgets.min_admissions_per_s, f"{rate:.1f}/s < {budgets.min_admissions_per_s}/s"


@pytest.mark.requirement("LAT-005")
def test_latency_does_not_grow_with_live_allocations(latency, budgets, record_figure):
    """The median admission time on the filled node MUST NOT exceed the empty node's by more than the load factor."""
    empty, loaded = percentile(latency.empty, 50), percentile(latency.loaded, 50)
    floor = 0.1 * budgets.p50_s  # below a tenth of the budget, ratios of microseconds are noise, not growth
    factor = max(loaded, floor) / max(empty, floor)
    record_figure("load growth of p50", factor, "x", budget=budgets.max_load_growth)
    assert factor <= budgets.max_load_growth, \
        f"p50 {empty * 1000:.2f} ms empty -> {loaded * 1000:.2f} ms at {latency.held_fraction:.0%} fill"


@pytest.mark.requirement("LAT-004")
def test_latency_growth_from_smallest_to_this_topology(latency, budgets, cci_settings, node_profile, topology,
                                                       node_session_factory, record_figure):
    """The median admission time MUST NOT exceed the run's smallest topology's by more than the growth factor."""
    smallest = min(cci_settings.topologies, key=lambda n: (len(load_topology(n).cpus), n))
    base = _CACHE.get(smallest)
    if base is None:
        small_topology = load_topology(smallest)
        base = measure(node_session_factory(topology=small_topology), small_topology, budgets)
    floor = 0.1 * budgets.p50_s
    factor = max(percentile(latency.all, 50), floor) / max(percentile(base.all, 50), floor)
    record_figure("topology growth of p50", factor, "x", budget=budgets.max_topology_growth)
    assert factor <= budgets.max_topology_growth, f"p50 grew {factor:.1f}x from {smallest} to {topology.name}"
