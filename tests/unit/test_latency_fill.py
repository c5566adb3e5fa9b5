"""The latency fill on a scripted node: wall-clock throughput, refusals judged by the independent checker."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import pytest

from cci_conformance.certify.budgets import growth_machines, load_budgets
from cci_conformance.certify.measurement_store import MeasurementStore
from cci_conformance.node.api import AdmissionResult, ContainerAssignment, NodeSnapshot
from cci_conformance.paths import SUITES_DIR
from cci_conformance.protocol.claims import parse_claim
from cci_conformance.topology import library

sys.path.insert(0, str(SUITES_DIR))  # the suites import claimkit as a top-level module
import test_latency as suite  # noqa: E402

NO_STORE = MeasurementStore(None)  # a bare suites run: nothing kept between processes

MACHINE = library.load("server-2s8c-smt2-intel")  # 16 cores of 2 threads


@dataclass
class ScriptedNode:
    """A node + driver in one: grants EXCLUSIVE groups one thread per core first (valid: nothing forbids it,
    and it soon leaves no whole core free), so a later DENIED claim becomes infeasible."""

    refuse_denied: bool = False  # a defect: refuse every CORE-SIBLING-DENIED claim, feasible or not
    node_overhead_s: float = 0.0  # node time of each admission on top of the driver's
    driver_s: float = 0.001
    refusal_s: float | None = None  # driver time of a refusal (default: driver_s)
    held: dict[str, frozenset] = field(default_factory=dict)
    seq: int = 0

    def snapshot(self) -> NodeSnapshot:
        return NodeSnapshot(mode="coexistence", online=MACHINE.online_cpus, reserved=frozenset(),
                            shared_pool=frozenset(), exclusive=dict(self.held), containers=(), drivers=("scripted",),
                            node_generation=1, policy="static", withheld={}, pending=(), startup=(), refused={},
                            registrations=1)

    def free(self) -> frozenset:
        return MACHINE.online_cpus - frozenset().union(*self.held.values())

    def create_pod(self, pod, *, settle: bool = True) -> AdmissionResult:  # noqa: ARG002
        claim = parse_claim(pod.claims[0].parameters, MACHINE)
        g = claim.groups[0]
        timing = {"node_seconds": self.driver_s + self.node_overhead_s, "driver_seconds": self.driver_s}
        free = self.free()
        if g.siblings == "denied":
            whole = [c for c in MACHINE.cores if c <= free]
            if self.refuse_denied or len(whole) < g.count:
                spent = self.driver_s if self.refusal_s is None else self.refusal_s
                return AdmissionResult(False, "CCIAdmitError", "no whole cores",
                                       node_seconds=spent + self.node_overhead_s, driver_seconds=spent)
            cpus = frozenset(min(c) for c in whole[:g.count])
            hold = frozenset().union(*whole[:g.count])
        else:
            order = sorted(free, key=lambda c: (sorted(MACHINE.core_of[c]).index(c), c))  # first threads first
            if len(order) < g.count:
                return AdmissionResult(False, "CCIAdmitError", "full", **timing)
            cpus = frozenset(order[:g.count])
            hold = cpus if g.exclusive else frozenset()
        self.seq += 1
        uid = f"p{self.seq}"
        if hold:
            self.held[f"{uid}/c0"] = hold
        return AdmissionResult(True, containers=(ContainerAssignment(uid, "c0", "id", cpus, g.exclusive, "cci"),),
                               **timing)

    def create_pods(self, pods, *, settle: bool = True, overlap: bool = False) -> list[AdmissionResult]:
        return [self.create_pod(pod, settle=settle) for pod in pods]

    def delete_pod(self, uid: str) -> None:
        self.held.pop(f"{uid}/c0", None)


def test_an_infeasible_refusal_adapts_the_fill_instead_of_failing_it():
    """Old behaviour: any refusal failed LAT-001..005 ("refused during the latency run")."""
    m = suite.measure(ScriptedNode(), MACHINE, load_budgets(), {"core-siblings"}, NO_STORE)
    assert m.infeasible_refusals >= 1, "the scripted node never made a DENIED claim infeasible"
    assert m.held_fraction >= m.target_fraction


def test_a_refusal_of_a_feasible_claim_still_fails_the_fill():
    with pytest.raises(AssertionError, match="could meet it"):
        suite.measure(ScriptedNode(refuse_denied=True), MACHINE, load_budgets(), {"core-siblings"}, NO_STORE)


def test_denied_claims_are_sent_only_to_a_driver_that_declares_core_siblings():
    node = ScriptedNode(refuse_denied=True)
    m = suite.measure(node, MACHINE, load_budgets(), set(), NO_STORE)  # refuse_denied would fail if one were sent
    assert m.infeasible_refusals == 0


def test_throughput_counts_every_attempts_driver_time_not_one_over_the_mean_of_the_admitted():
    """Old behaviour: 1 / mean(driver time of admitted pods) = 100/s here, although the driver spent 600 ms on
    each refusal; over the fill's wall clock the burst got through far slower."""
    budgets = load_budgets()
    node = ScriptedNode(driver_s=0.01, refusal_s=0.6, node_overhead_s=0.002)
    m = suite.measure(node, MACHINE, budgets, {"core-siblings"}, NO_STORE)
    assert m.infeasible_refusals >= 1
    assert 1 / (sum(m.fill) / len(m.fill)) >= budgets.min_admissions_per_s  # what the old figure said
    want = m.fill_admissions / (0.01 * m.fill_admissions + 0.6 * m.infeasible_refusals)
    assert m.fill_rate == pytest.approx(want, rel=0.01)
    assert m.fill_rate_with_node < m.fill_rate  # the node's own time is reported, not charged
    with pytest.raises(AssertionError, match="refused attempts included"):
        suite.test_serial_fill_throughput_reaches_the_floor(m, budgets, lambda *a, **k: None)


def test_growth_is_judged_from_the_smallest_library_machine_on_any_single_topology():
    """Old behaviour: a run of one topology compared it with itself (factor 1, LAT-004 could not fail)."""
    smallest = min((library.load(n) for n in library.names()), key=lambda t: (len(t.cpus), t.name))
    for name in library.names():
        base, probe = growth_machines(library.load(name), [library.load(name)])
        assert base.name == smallest.name
        assert probe.name != base.name and len(probe.cpus) >= 2 * len(base.cpus), name


def test_a_run_machine_as_small_as_any_probe_is_the_probe():
    """A laptop run beside a 32-CPU run machine is probed by that machine, which the run measures anyway, not by
    another library machine of the same size (on kind a node and a fill of minutes more); alone it keeps the
    smallest library probe."""
    laptop, server = library.load("laptop-1s4c-smt2"), library.load("server-2s8c-smt2-intel")
    assert growth_machines(laptop, [server, laptop]) == (laptop, server)
    base, probe = growth_machines(laptop, [laptop])
    assert base == laptop and len(probe.cpus) == len(server.cpus) and probe.name < server.name


def test_no_node_is_opened_for_a_machine_another_worker_measured_meanwhile(tmp_path):
    """The store is read again under the lock before a node is opened: the other worker's figures, no node."""
    store = MeasurementStore(tmp_path)
    first = suite.measure(ScriptedNode(), MACHINE, load_budgets(), {"core-siblings"}, store)
    suite._CACHE.pop(MACHINE.name, None)

    class LateStore(MeasurementStore):
        """Empty at the first look (before the lock); the other worker's save lands before the second."""
        looks = 0

        def load(self, machine):
            self.looks += 1
            return None if self.looks == 1 else super().load(machine)

    def must_not_open():
        raise AssertionError("a node was opened for a machine the run had measured")
    try:
        got = suite._measured(MACHINE, must_not_open, lambda session: None, load_budgets(), {"core-siblings"},
                              LateStore(tmp_path))
    finally:
        suite._CACHE.pop(MACHINE.name, None)
    assert got == first


def test_a_machine_measured_once_in_a_run_is_read_back_not_filled_again(tmp_path):
    """Workers of one run share the report folder: the second asks the store and never touches its node."""
    store = MeasurementStore(tmp_path)
    first = suite.measure(ScriptedNode(), MACHINE, load_budgets(), {"core-siblings"}, store)
    assert (tmp_path / "measurements" / f"{MACHINE.name}.json").is_file()

    class Untouchable:
        def __getattr__(self, name):
            raise AssertionError(f"the node was used ({name}) although the run had measured {MACHINE.name}")
    again = suite.measure(Untouchable(), MACHINE, load_budgets(), {"core-siblings"}, store)
    assert again == first and again.fill


def test_a_measurement_of_another_driver_or_an_earlier_run_is_never_read(tmp_path):
    """A report folder reused by a second run, or another driver's key, lends it nothing (a false pass)."""
    mine = MeasurementStore(tmp_path, {"driver": "a"})
    mine.save(MACHINE.name, {"empty": [0.001]})
    assert mine.load(MACHINE.name) == {"empty": [0.001]}
    assert MeasurementStore(tmp_path, {"driver": "b"}).load(MACHINE.name) is None
    mine.clear()  # what the run's controller does first
    assert mine.load(MACHINE.name) is None
