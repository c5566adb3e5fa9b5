"""Merge pytest's per-phase test reports (local or sent by xdist workers) into one TestResult per test."""

from __future__ import annotations

from .. import interrupts
from .outcomes import (
    BACKEND_NA_KIND,
    BACKEND_NA_PREFIX,
    ERROR,
    FAILED,
    NOT_APPLICABLE,
    PASSED,
    SKIPPED,
    TOPOLOGY_NA_KIND,
    TOPOLOGY_NA_PREFIX,
    TestResult,
)

# user_properties keys the plugin and fixtures set on items; they travel with every report,
# including through xdist workers, which is how the controller learns them without collecting.
PROP_REQUIREMENTS = "cci_requirements"
PROP_NA = "cci_not_applicable"
PROP_FIGURE = "cci_figure"
PROP_EVIDENCE = "cci_evidence"
PROP_NODE_FAULT = "cci_node_fault"  # the test failed on a NodeFault (backends/base.py): untested, not a fail
NODE_FAULT_PREFIX = "the node failed, not the driver: "
PROP_RUN_STOPPED = "cci_run_stopped"  # the test could not start a node and stopped the run (early_stop.py): untested
RUN_STOPPED_PREFIX = "not run: the run stopped early (run.stopped_early): "
PROP_REPLAY = "cci_replay"  # the command that replays a failure (fixtures/figures.py record_replay)
# A reason is the violated rule, read in report.json, the summary and JUnit: long enough for a checker's whole
# violation; only a runaway message (a repr of a whole ledger) is cut. A replay command is never part of it.
MAX_REASON = 4000


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


def report_reason(report) -> str:
    """The one-line why of a failed or skipped phase."""
    longrepr = report.longrepr
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # skip: (path, lineno, message)
        message = str(longrepr[2])
        return _one_line(message.removeprefix("Skipped: "))
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", None):
        return _one_line(crash.message)
    lines = [ln for ln in str(longrepr).splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("E ")]
    return _one_line((errors[0][1:] if errors else lines[-1]) if lines else "")


class ResultCollector:
    """Per-test results in the order tests finished; ``finished`` counts tests whose teardown arrived."""

    def __init__(self) -> None:
        self.results: dict[str, TestResult] = {}
        self.finished = 0

    def add(self, report) -> TestResult | None:
        """Fold one phase report in; returns the result when this report finished its test."""
        res = self.results.get(report.nodeid)
        if res is None:
            res = self.results[report.nodeid] = TestResult(nodeid=report.nodeid, outcome="")
        res.duration_s += float(getattr(report, "duration", 0.0) or 0.0)
        self._absorb_properties(res, report)
        when = report.when
        wasxfail = hasattr(report, "wasxfail")
        props = dict(report.user_properties) if report.failed else {}
        fault, stopped = props.get(PROP_NODE_FAULT), props.get(PROP_RUN_STOPPED)
        if stopped and res.outcome not in (FAILED, ERROR):
            # the node or driver never came up for it: REG-001 carries that (once), the test proved nothing
            res.outcome, res.reason = SKIPPED, _one_line(RUN_STOPPED_PREFIX + stopped)
        elif fault and res.outcome not in (FAILED, ERROR):
            # a failure the node made without the driver (a stalled runtime) proves nothing about the driver:
            # untested, so the run cannot certify, but the driver is not blamed (docs/spec.md 4.2)
            res.outcome, res.reason = SKIPPED, _one_line(NODE_FAULT_PREFIX + fault)
        elif report.failed:
            if when == "call":
                res.outcome, res.reason = FAILED, report_reason(report)
            elif res.outcome != FAILED:  # a setup or teardown failure: the test could not prove anything
                res.outcome, res.reason = ERROR, f"{when}: {report_reason(report)}"
        elif report.skipped:
            if res.outcome not in (FAILED, ERROR):
                self._skip(res, report, wasxfail)
        elif when == "call" and res.outcome == "":
            if wasxfail:  # an expected failure that passed proves nothing either way
                res.outcome, res.reason = SKIPPED, f"xpassed (marked xfail: {report.wasxfail})"
            else:
                res.outcome = PASSED
        if when == "teardown":
            if res.outcome == "":
                res.outcome, res.reason = SKIPPED, "did not run"
            elif res.outcome in (FAILED, ERROR) and interrupts.requested():
                # SIGTERM arrived while it ran and code under test turned the interrupt into another error
                # (interrupts.py): what failed is the run's stop, not the driver; untested, as interrupted() does
                res.outcome, res.reason = SKIPPED, f"did not finish: the run was interrupted ({res.reason[:200]})"
            self.finished += 1
            return res
        return None

    def _skip(self, res: TestResult, report, wasxfail: bool) -> None:
        reason = report_reason(report)
        na = dict(report.user_properties).get(PROP_NA)
        if wasxfail:
            res.outcome, res.reason = SKIPPED, f"xfailed: {report.wasxfail}"
        elif na:
            res.outcome, res.reason, res.na_kind = NOT_APPLICABLE, na["reason"], na["kind"]
        elif reason.startswith(TOPOLOGY_NA_PREFIX):
            res.outcome, res.reason, res.na_kind = NOT_APPLICABLE, reason, TOPOLOGY_NA_KIND
        elif reason.startswith(BACKEND_NA_PREFIX):
            res.outcome, res.reason, res.na_kind = NOT_APPLICABLE, reason, BACKEND_NA_KIND
        else:
            res.outcome, res.reason = SKIPPED, reason

    @staticmethod
    def _absorb_properties(res: TestResult, report) -> None:
        for key, value in report.user_properties:
            if key == PROP_REQUIREMENTS:
                res.requirements = sorted(set(res.requirements) | set(value))
            elif key == PROP_FIGURE:
                if dict(value) not in res.figures:  # every phase report repeats the item's properties
                    res.figures.append(dict(value))
            elif key == PROP_EVIDENCE:
                res.evidence.extend(p for p in value if p not in res.evidence)
            elif key == PROP_REPLAY:
                res.replay = str(value)
            elif (key not in (PROP_NA, PROP_NODE_FAULT, PROP_RUN_STOPPED, PROP_REPLAY)
                  and isinstance(value, int | float) and not isinstance(value, bool)):
                fig = {"name": key, "value": value}
                if fig not in res.figures:  # plain record_property numbers are figures too
                    res.figures.append(fig)

    def interrupted(self) -> None:
        """Mark tests that started but never finished (the run was interrupted)."""
        for res in self.results.values():
            if res.outcome == "":
                res.outcome, res.reason = SKIPPED, "did not finish: the run was interrupted"

