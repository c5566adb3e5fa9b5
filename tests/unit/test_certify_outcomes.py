"""Per-test outcomes and requirement verdicts: a test that did not run is never a pass."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from cci_conformance.certify.catalog import Requirement, parse_catalog
from cci_conformance.certify.collector import PROP_FIGURE, PROP_NA, PROP_REPLAY, PROP_REQUIREMENTS, ResultCollector
from cci_conformance.certify.outcomes import (
    BACKEND_NA_PREFIX,
    TOPOLOGY_NA_PREFIX,
    TestResult,
    is_certified,
    requirement_verdict,
    results_by_requirement,
)

REQ = Requirement("CLAIM-001", "claims", "It MUST work.", "KEP-3675 l.1", "exclusive", True, ())
REQ_ANY = Requirement("CLAIM-002", "claims", "It MUST work.", "KEP-3675 l.1", None, True, ())


def r(outcome, kind="", reason="why", nodeid="t.py::x[a]"):
    return TestResult(nodeid=nodeid, outcome=outcome, reason=reason, na_kind=kind)


@pytest.mark.parametrize("req, results, status", [
    (REQ, [], "untested"),
    (REQ, [r("passed"), r("passed")], "pass"),
    (REQ, [r("passed"), r("failed")], "fail"),
    (REQ, [r("passed"), r("error")], "fail"),
    (REQ, [r("failed"), r("skipped")], "fail"),
    (REQ, [r("passed"), r("skipped")], "untested"),
    (REQ, [r("passed"), r("missing")], "untested"),
    (REQ, [r("not-applicable", "capability")] * 2, "not-applicable"),
    (REQ_ANY, [r("not-applicable", "capability")], "untested"),  # a capability cannot waive a universal MUST
    (REQ, [r("not-applicable", "topology")] * 2, "untested"),
    (REQ, [r("passed"), r("not-applicable", "topology")], "pass"),
    (REQ, [r("passed"), r("not-applicable", "capability")], "pass"),
    # a hook the backend does not offer (backends/base.py FEATURES): the harness cannot exercise it here
    (REQ_ANY, [r("not-applicable", "backend")] * 2, "not-applicable"),
    (REQ_ANY, [r("not-applicable", "backend"), r("not-applicable", "topology")], "not-applicable"),
    (REQ_ANY, [r("passed"), r("not-applicable", "backend")], "pass"),
    (REQ_ANY, [r("failed"), r("not-applicable", "backend")], "fail"),
    (REQ_ANY, [r("skipped"), r("not-applicable", "backend")], "untested"),
])
def test_verdict_rules(req, results, status):
    verdict = requirement_verdict(req, results)
    assert verdict.status == status
    # a pass has no reason unless a case of it was not applicable: then it says so (never a plain pass)
    assert (verdict.reason == "") == (status == "pass" and all(t.outcome == "passed" for t in results))


def test_a_pass_with_not_applicable_cases_names_each_case_and_why():
    backend = BACKEND_NA_PREFIX + "backend kind cannot hand the driver parameters that are not an object"
    results = [r("passed", nodeid="t.py::x[unknown key-a]"),
               r("not-applicable", "backend", backend, nodeid="t.py::x[not an object-a]"),
               r("not-applicable", "capability", "driver d does not declare capability groups",
                 nodeid="t.py::x[bad second group-a]"),
               r("not-applicable", "capability", "driver d does not declare capability groups",
                 nodeid="t.py::x[bad second group-b]")]
    verdict = requirement_verdict(REQ_ANY, results)
    assert verdict.status == "pass"
    assert verdict.reason == (f"3 cases not applicable: {backend} (not an object-a); driver d does not declare "
                              "capability groups (bad second group-a, bad second group-b)")
    one = requirement_verdict(REQ_ANY, results[:2])
    assert one.reason == f"1 case not applicable: {backend} (not an object-a)"


def test_a_failure_keeps_its_rule_whole_and_its_replay_apart():
    rule = "[S2.4] group 0: CORE-SIBLING-PREFERRED: 2 cores split " + "x" * 600
    long = "E   AssertionError: " + rule
    res = run(report("setup", "passed"),
              report("call", "failed", [(PROP_REPLAY, "pytest suites/test_stateful.py --hypothesis-seed=5")],
                     longrepr=long),
              report("teardown", "passed"))
    assert res.reason == "AssertionError: " + rule  # 400 characters used to cut it behind the replay command
    assert res.replay == "pytest suites/test_stateful.py --hypothesis-seed=5"
    assert res.as_dict()["replay"] == res.replay
    verdict = requirement_verdict(REQ_ANY, [res])
    assert verdict.status == "fail" and verdict.reason.endswith(rule) and verdict.replay == res.replay


REQ_COEX = Requirement("ACCT-001", "accounting", "It MUST hold.", "seed meeting", None, True, (),
                       modes=("coexistence",))


@pytest.mark.parametrize("results, mode, status", [
    ([r("not-applicable", "topology")], "alpha", "not-applicable"),  # the run's mode is out of its scope
    ([], "alpha", "not-applicable"),
    ([r("failed")], "alpha", "fail"),  # a failure counts in any mode
    ([r("not-applicable", "topology")], "coexistence", "untested"),  # in scope: skipping is not a pass
    ([r("passed")], "coexistence", "pass"),
    ([r("not-applicable", "topology")], None, "untested"),  # an unknown mode never waives a requirement
])
def test_a_requirement_of_another_node_mode_does_not_apply(results, mode, status):
    verdict = requirement_verdict(REQ_COEX, results, mode)
    assert verdict.status == status
    if status == "not-applicable":
        assert verdict.reason == "applies in coexistence mode only; this run's node profile is in alpha mode"


def test_certified_only_when_every_required_requirement_passes_or_does_not_apply():
    catalog = parse_catalog({"version": 1, "areas": {"claims": "c"}, "requirements": [
        {"id": "CLAIM-001", "area": "claims", "text": "a MUST", "source": "KEP-3675 x", "capability": None,
         "required": True, "tests": []},
        {"id": "CLAIM-002", "area": "claims", "text": "b MUST", "source": "KEP-3675 x", "capability": None,
         "required": False, "tests": []}]}, Path("c.yaml"))
    assert is_certified(catalog, {"CLAIM-001": "pass", "CLAIM-002": "fail"})
    assert is_certified(catalog, {"CLAIM-001": "not-applicable", "CLAIM-002": "untested"})
    assert not is_certified(catalog, {"CLAIM-001": "untested", "CLAIM-002": "pass"})
    assert not is_certified(catalog, {"CLAIM-001": "fail", "CLAIM-002": "pass"})


def test_listed_tests_that_never_ran_are_missing():
    catalog = parse_catalog({"version": 1, "areas": {"claims": "c"}, "requirements": [
        {"id": "CLAIM-001", "area": "claims", "text": "a MUST", "source": "KEP-3675 x", "capability": None,
         "required": True, "tests": ["t.py::listed", "t.py::ran"]}]}, Path("c.yaml"))
    results = {"suites/t.py::ran[a]": r("passed", nodeid="suites/t.py::ran[a]")}
    tests = results_by_requirement(catalog, results)["CLAIM-001"]
    assert [(t.nodeid, t.outcome) for t in tests] == [("suites/t.py::ran[a]", "passed"), ("t.py::listed", "missing")]
    assert requirement_verdict(catalog.requirements[0], tests).status == "untested"


def report(when, outcome, props=(), longrepr=None, nodeid="t.py::x[a]", **extra):
    return SimpleNamespace(nodeid=nodeid, when=when, outcome=outcome, passed=outcome == "passed",
                           failed=outcome == "failed", skipped=outcome == "skipped", duration=0.1,
                           user_properties=list(props), longrepr=longrepr, **extra)


PROPS = [(PROP_REQUIREMENTS, ["CLAIM-001"])]


def run(*reports):
    collector = ResultCollector()
    done = [collector.add(rep) for rep in reports]
    assert done[:-1] == [None] * (len(done) - 1)
    return done[-1]


def test_collector_merges_phases():
    res = run(report("setup", "passed", PROPS), report("call", "passed", PROPS), report("teardown", "passed", PROPS))
    assert (res.outcome, res.requirements) == ("passed", ["CLAIM-001"])
    assert res.duration_s == pytest.approx(0.3)


def test_collector_failures_and_errors():
    crash = SimpleNamespace(reprcrash=SimpleNamespace(message="AssertionError: 3 != 4"))
    res = run(report("setup", "passed"), report("call", "failed", longrepr=crash), report("teardown", "passed"))
    assert (res.outcome, res.reason) == ("failed", "AssertionError: 3 != 4")
    res = run(report("setup", "failed", longrepr="E   RuntimeError: no driver\nmore"), report("teardown", "passed"))
    assert res.outcome == "error" and res.reason == "setup: RuntimeError: no driver"
    res = run(report("setup", "passed"), report("call", "passed"), report("teardown", "failed", longrepr="boom"))
    assert res.outcome == "error" and res.reason.startswith("teardown:")


def test_collector_skips():
    na = (PROP_NA, {"kind": "capability", "reason": "driver d does not declare capability groups"})
    res = run(report("setup", "skipped", [na], longrepr=("f", 1, "Skipped: x")), report("teardown", "passed"))
    assert (res.outcome, res.na_kind, res.reason) == ("not-applicable", "capability", na[1]["reason"])
    topo = ("f", 1, "Skipped: " + TOPOLOGY_NA_PREFIX + "one NUMA node")
    res = run(report("setup", "passed"), report("call", "skipped", longrepr=topo), report("teardown", "passed"))
    assert (res.outcome, res.na_kind) == ("not-applicable", "topology")
    backend = ("f", 1, "Skipped: " + BACKEND_NA_PREFIX + "backend kind cannot hold the driver mid-answer")
    res = run(report("setup", "passed"), report("call", "skipped", longrepr=backend), report("teardown", "passed"))
    assert (res.outcome, res.na_kind) == ("not-applicable", "backend") and "mid-answer" in res.reason
    res = run(report("setup", "passed"), report("call", "skipped", longrepr=("f", 1, "Skipped: flaky")),
              report("teardown", "passed"))
    assert (res.outcome, res.reason) == ("skipped", "flaky")
    res = run(report("setup", "passed"), report("call", "skipped", longrepr=("f", 1, "x"), wasxfail="known"),
              report("teardown", "passed"))
    assert res.outcome == "skipped"  # an expected failure proves nothing
    res = run(report("setup", "passed"), report("call", "passed", wasxfail="known"), report("teardown", "passed"))
    assert res.outcome == "skipped"


def test_collector_figures_are_not_repeated_per_phase():
    fig = (PROP_FIGURE, {"name": "p50", "value": 0.002, "unit": "s"})
    res = run(report("setup", "passed"), report("call", "passed", [fig, ("plain", 3)]),
              report("teardown", "passed", [fig, ("plain", 3)]))
    assert res.figures == [{"name": "p50", "value": 0.002, "unit": "s"}, {"name": "plain", "value": 3}]


def test_collector_marks_unfinished_tests_on_interrupt():
    collector = ResultCollector()
    collector.add(report("setup", "passed"))
    collector.interrupted()
    assert collector.results["t.py::x[a]"].outcome == "skipped"


def test_a_test_failing_after_sigterm_is_untested_not_failed(monkeypatch):
    from cci_conformance import interrupts

    crash = SimpleNamespace(reprcrash=SimpleNamespace(message="StatusCode.CANCELLED"))
    reports = (report("setup", "passed"), report("call", "failed", longrepr=crash), report("teardown", "passed"))
    assert run(*reports).outcome == "failed"  # no SIGTERM: the failure stands
    monkeypatch.setitem(interrupts._state, "requested", True)  # SIGTERM arrived while it ran
    res = run(*reports)
    assert res.outcome == "skipped" and res.reason.startswith("did not finish: the run was interrupted")
    assert "CANCELLED" in res.reason


def test_a_node_fault_is_untested_and_only_in_the_phase_that_raised_it():
    from cci_conformance.certify.collector import PROP_NODE_FAULT

    crash = SimpleNamespace(reprcrash=SimpleNamespace(message="NodeFault: no sandbox"))
    fault = (PROP_NODE_FAULT, "no sandbox after 120s")
    res = run(report("setup", "passed"), report("call", "failed", [fault], longrepr=crash),
              report("teardown", "passed"))
    assert res.outcome == "skipped" and res.reason == "the node failed, not the driver: no sandbox after 120s"
    # an earlier real failure stays a failure
    res = run(report("setup", "passed"), report("call", "failed", longrepr=crash),
              report("teardown", "failed", [fault], longrepr="E   boom"))
    assert res.outcome == "failed"
