"""Per-test outcomes and the rule that turns them into one status per requirement (docs/spec.md §4)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from .catalog import Catalog, Requirement

# Test outcomes in report.json.
PASSED, FAILED, ERROR, SKIPPED, NOT_APPLICABLE, MISSING = (
    "passed", "failed", "error", "skipped", "not-applicable", "missing")
# Requirement statuses in report.json.
PASS, FAIL, NA, UNTESTED = "pass", "fail", "not-applicable", "untested"
STATUSES = (PASS, FAIL, NA, UNTESTED)

# A skip reason starting with this marks a test that does not apply to this run's machine; it is
# not a pass: a requirement all of whose tests are topology-inapplicable stays untested.
TOPOLOGY_NA_PREFIX = "not applicable on this topology: "
# A skip reason starting with this marks a test needing a hook the backend does not offer (backends/base.py
# FEATURES): the requirement is not applicable on that backend, and the reason says which hook and why.
BACKEND_NA_PREFIX = "not applicable on this backend: "
CAPABILITY_NA_KIND = "capability"
TOPOLOGY_NA_KIND = "topology"
BACKEND_NA_KIND = "backend"


def capability_skip_reason(driver: str, capability: str) -> str:
    return f"driver {driver} does not declare capability {capability}"


def not_applicable(reason: str) -> None:
    """Skip the running test because the machine cannot exercise it (e.g. one NUMA node for a bind test)."""
    pytest.skip(TOPOLOGY_NA_PREFIX + reason)


def require_feature(session, feature: str) -> None:
    """Skip the running test, not-applicable with the backend's reason, unless ``session`` offers ``feature``
    (a key of backends/base.py FEATURES). The only way a suite asks for an optional hook."""
    from ..backends.base import missing_feature

    reason = missing_feature(session, feature)
    if reason:
        pytest.skip(BACKEND_NA_PREFIX + reason)


@dataclass
class TestResult:
    """What one test node id (one topology parameter) ended as, merged over setup, call and teardown."""

    __test__ = False  # not a test class, despite its name

    nodeid: str
    outcome: str
    reason: str = ""
    duration_s: float = 0.0
    requirements: list[str] = field(default_factory=list)
    na_kind: str = ""
    figures: list[dict] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    replay: str = ""  # the command that replays this test's failure (kept apart so the reason stays the rule)

    def as_dict(self) -> dict:
        out = {"nodeid": self.nodeid, "outcome": self.outcome, "reason": self.reason,
               "duration_s": round(self.duration_s, 4)}
        if self.evidence:
            out["evidence"] = list(self.evidence)
        if self.replay:
            out["replay"] = self.replay
        return out


@dataclass(frozen=True)
class Verdict:
    status: str
    reason: str
    replay: str = ""  # a failed test's replay command (TestResult.replay), for a fail only


def case_name(nodeid: str) -> str:
    """The parameters of a test node id (``a[b-c]`` -> ``b-c``), else its function name."""
    base, sep, params = nodeid.partition("[")
    return params.removesuffix("]") if sep else base.rsplit("::", 1)[-1]


def not_applicable_cases(results: list[TestResult]) -> str:
    """What a passing requirement did not exercise (spec §4.3 rule 6): "" when every test passed, else
    ``N case(s) not applicable: <reason> (<case>); ...``, each distinct reason once with the cases it hit."""
    na = [r for r in results if r.outcome == NOT_APPLICABLE]
    if not na:
        return ""
    by_reason: dict[str, list[str]] = {}
    for r in na:
        by_reason.setdefault(r.reason, []).append(case_name(r.nodeid))
    parts = [f"{reason} ({', '.join(cases)})" for reason, cases in by_reason.items()]
    return f"{len(na)} case{'s' if len(na) > 1 else ''} not applicable: " + "; ".join(parts)


def _first(results: list[TestResult], outcomes: tuple[str, ...]) -> TestResult | None:
    return next((r for r in results if r.outcome in outcomes), None)


def requirement_verdict(req: Requirement, results: list[TestResult], node_mode: str | None = None) -> Verdict:
    """Pass only when every test passed (or was not applicable); a test that did not run is never a pass.
    A pass with not-applicable tests keeps them in its reason (:func:`not_applicable_cases`).

    A requirement the catalog scopes to other node modes than the run's is not applicable, unless a
    test of it failed (a failure always counts).
    """
    bad = _first(results, (FAILED, ERROR))
    if bad:
        return Verdict(FAIL, f"{bad.nodeid}: {bad.reason}" if bad.reason else bad.nodeid, bad.replay)
    if not req.applies_in(node_mode):
        return Verdict(NA, f"applies in {' and '.join(req.modes)} mode only; this run's node profile is in "
                           f"{node_mode} mode")
    if not results:
        return Verdict(UNTESTED, "no test proves this requirement")
    na = [r for r in results if r.outcome == NOT_APPLICABLE]
    if len(na) == len(results):
        if all(r.na_kind == CAPABILITY_NA_KIND for r in na):
            if req.capability is None:  # a requirement for every driver cannot be waived by a capability
                return Verdict(UNTESTED, f"needs no capability, but every test of it was skipped: {na[0].reason}")
            return Verdict(NA, na[0].reason)
        backend = next((r for r in na if r.na_kind == BACKEND_NA_KIND), None)
        if backend is not None:  # the harness cannot exercise it here: says so, never a pass (spec §4.3)
            return Verdict(NA, backend.reason)
        topo = next(r for r in na if r.na_kind != CAPABILITY_NA_KIND)
        why = topo.reason.removeprefix(TOPOLOGY_NA_PREFIX)
        return Verdict(UNTESTED, f"not applicable on any topology of this run: {why}")
    not_run = [r for r in results if r.outcome not in (PASSED, NOT_APPLICABLE)]
    if not_run:
        first = not_run[0]
        return Verdict(UNTESTED, f"{len(not_run)} of {len(results)} tests did not run; "
                                 f"{first.nodeid}: {first.outcome}" + (f" ({first.reason})" if first.reason else ""))
    # A pass that left cases out says which and why: "pass" alone would claim more than was exercised.
    return Verdict(PASS, not_applicable_cases(results))


def results_by_requirement(catalog: Catalog, results: dict[str, TestResult]) -> dict[str, list[TestResult]]:
    """Attach each test result to its requirements (marker or catalog ``tests``); listed tests with
    no result appear as ``missing``."""
    from .catalog import base_test_id

    by_req: dict[str, list[TestResult]] = {r.id: [] for r in catalog.requirements}
    for res in results.values():
        ids = set(res.requirements) | set(catalog.requirements_for_test(base_test_id(res.nodeid)))
        for rid in ids:
            if rid in by_req:
                by_req[rid].append(res)
    for req in catalog.requirements:
        seen = {base_test_id(r.nodeid) for r in by_req[req.id]}
        for listed in req.tests:
            if not any(s == listed or s.endswith("/" + listed) for s in seen):
                by_req[req.id].append(TestResult(nodeid=listed, outcome=MISSING,
                                                 reason="listed in the catalog but not run"))
    return by_req


def is_certified(catalog: Catalog, statuses: dict[str, str], kind: str | None = None) -> bool:
    """Every required requirement (of ``kind``, when given) passed or does not apply to the declared capabilities."""
    return all(statuses[r.id] in (PASS, NA) for r in catalog.requirements
               if r.required and (kind is None or r.kind == kind))
