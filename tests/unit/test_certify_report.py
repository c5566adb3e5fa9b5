"""report.json building and schema, the HTML page with its SVG charts, and the text summary."""

from __future__ import annotations

import json
from pathlib import Path

from cci_conformance.certify.bundle import environment, slug
from cci_conformance.certify.catalog import parse_catalog
from cci_conformance.certify.html import render_html
from cci_conformance.certify.outcomes import TestResult
from cci_conformance.certify.report import build_report, validation_errors, write_json_atomic
from cci_conformance.certify.summary import summary_lines
from cci_conformance.certify.svg import growth_curve, histogram

RUN = {
    "interrupted": False, "started": "2026-01-01T00:00:00+00:00", "finished": "2026-01-01T00:01:00+00:00",
    "duration_s": 60.0, "harness_version": "0.1.0",
    "driver": {"name": "reference", "version": None, "manifest": "driver.yaml", "manifest_sha256": None,
               "digest": None, "capabilities": ["exclusive"]},
    "topologies": [{"name": "laptop-1s4c-smt2", "cpus": 8, "numa_nodes": 1}], "backend": "embedded",
    "node_profile": "coexistence", "node_mode": "coexistence", "profile": {"name": "default"}, "workers": 0,
    "pytest_args": [],
    "exit_status": 0, "environment": {k: v for k, v in environment().items() if k != "harness_version"},
}


def _results() -> dict[str, TestResult]:
    small = {"name": "admission_p50", "value": 0.002, "unit": "s", "budget": 0.01, "comparison": "<=",
             "topology": "laptop-1s4c-smt2", "cpus": 8, "samples": [0.001, 0.002, 0.003]}
    large = dict(small, topology="server-4s16c-smt2", cpus=128, value=0.004)
    return {
        "s/t.py::a[x]": TestResult("s/t.py::a[x]", "passed", requirements=["LAT-001"], figures=[small]),
        "s/t.py::a[y]": TestResult("s/t.py::a[y]", "passed", requirements=["LAT-001"], figures=[large]),
        "s/t.py::b[x]": TestResult("s/t.py::b[x]", "failed", "<script>alert(1)</script>", requirements=["CLAIM-005"],
                                   evidence=["evidence/s_t.py_b_x/session-0/node.log"]),
        "s/t.py::c[x]": TestResult("s/t.py::c[x]", "passed"),
    }


def _catalog():
    def req(rid, area):
        return {"id": rid, "area": area, "text": f"{rid} MUST hold.", "source": "KEP-3675 l.1", "capability": None,
                "required": True, "tests": []}

    return parse_catalog({"version": 1, "areas": {"claims": "claims", "latency": "latency"},
                          "requirements": [req("CLAIM-001", "claims"), req("CLAIM-005", "claims"),
                                           req("LAT-001", "latency")]}, Path("catalog.yaml"))


def _report(complete=True, errors=()):
    return build_report(catalog=_catalog(), results=_results(), run=dict(RUN), errors=list(errors),
                        complete=complete)


def test_report_validates_and_judges():
    report = _report()
    assert validation_errors(report) == []
    status = {r["id"]: r["status"] for r in report["requirements"]}
    assert status["LAT-001"] == "pass" and status["CLAIM-005"] == "fail" and status["CLAIM-001"] == "untested"
    assert report["verdict"]["certified"] is False and report["verdict"]["exit_code"] == 1
    assert "CLAIM-005" in report["verdict"]["failed_required"]
    assert [t["nodeid"] for t in report["unmapped_tests"]] == ["s/t.py::c[x]"]
    lat = next(r for r in report["requirements"] if r["id"] == "LAT-001")
    assert [f["test"] for f in lat["figures"]] == ["s/t.py::a[x]", "s/t.py::a[y]"]
    counts = report["verdict"]["counts"]
    assert sum(counts.values()) == len(report["requirements"])
    assert sum(a["counts"]["fail"] for a in report["areas"]) == counts["fail"]


def test_schema_rejects_a_false_pass():
    report = _report()
    lat = next(r for r in report["requirements"] if r["id"] == "LAT-001")
    assert lat["status"] == "pass"
    lat["tests"][0]["outcome"] = "skipped"  # a "pass" over a test that did not pass is schema-invalid
    assert any(e.startswith("requirements/2") for e in validation_errors(report))
    report = _report()
    report["requirements"][0]["status"] = "great"
    assert validation_errors(report)


def test_incomplete_or_erroneous_runs_never_certify():
    assert _report(complete=False)["verdict"]["certified"] is False
    err = {"kind": "collection", "where": "x", "message": "bad"}
    assert _report(errors=[err])["verdict"]["certified"] is False


def test_html_escapes_and_draws(tmp_path):
    page = render_html(_report())
    assert "<script>alert" not in page and "&lt;script&gt;" in page
    assert page.count("<svg") == 3  # one growth curve, two histograms
    assert "href='evidence/s_t.py_b_x/session-0/node.log'" in page
    assert "NOT CERTIFIED" in page


def test_charts():
    svg = histogram([1.0, 2.0, 2.5, 9.0], "t", {"budget": 10.0})
    assert svg.startswith("<svg") and svg.count("<rect") == 24 and "budget" in svg
    assert histogram([], "t") == ""
    curve = growth_curve([(8, 1.0, "a"), (128, 3.0, "b")], "g", "ms", limit=4.0)
    assert curve.count("<circle") == 2 and "allowed" in curve
    assert growth_curve([(8, 1.0, "a")], "g", "ms") == ""


def test_summary_lines():
    lines = summary_lines(_report(), Path("/r"))
    text = "\n".join(lines)
    assert "FAIL     CLAIM-005" in text and "verdict: NOT CERTIFIED (exit 1)" in text
    assert "admission_p50" in text and "2.00 ms" in text and "budget <= 10.00 ms" in text
    assert lines[-3:] == ["report:  /r/report.json", "html:    /r/report.html", "junit:   /r/junit.xml"]


def test_a_run_in_another_node_mode_certifies_for_that_mode_only():
    catalog = _catalog()
    scoped = parse_catalog({"version": 1, "areas": dict(catalog.areas), "requirements": [
        {"id": r.id, "area": r.area, "text": r.text, "source": r.source, "capability": None, "required": True,
         "tests": [], **({"modes": ["coexistence"]} if r.id == "CLAIM-001" else {})}
        for r in catalog.requirements if r.id != "CLAIM-005"]}, Path("catalog.yaml"))
    results = {k: v for k, v in _results().items() if "b[x]" not in k}
    alpha = build_report(catalog=scoped, results=results, run=dict(RUN, node_mode="alpha"), errors=[], complete=True)
    assert validation_errors(alpha) == []
    assert alpha["verdict"]["certified"] and alpha["verdict"]["other_mode_requirements"] == ["CLAIM-001"]
    assert "scope:   alpha mode only; not applicable here: CLAIM-001" in summary_lines(alpha, None)
    assert "alpha mode only" in render_html(alpha)
    coex = build_report(catalog=scoped, results=results, run=dict(RUN), errors=[], complete=True)
    assert not coex["verdict"]["certified"] and coex["verdict"]["untested_required"] == ["CLAIM-001"]


def test_atomic_write_and_slug(tmp_path):
    write_json_atomic(tmp_path / "a" / "r.json", {"x": 1})
    assert json.loads((tmp_path / "a" / "r.json").read_text()) == {"x": 1}
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["r.json"]
    assert slug("suites/test_a.py::test_x[laptop-1s4c-smt2]") == "suites_test_a.py_test_x_laptop-1s4c-smt2"
    assert len(slug("x" * 300)) == 80


def test_a_failure_reason_is_shown_whole_and_wrapped_in_the_summary():
    """A CI log may be all a reader has: the cause after a long replay command must still be printed."""
    report = _report()
    failed = next(r for r in report["requirements"] if r["status"] == "fail")
    failed["reason"] = "hypothesis seed 1 (replay: pytest " + "--opt value " * 20 + "): THE-CAUSE cpus {3}"
    lines = summary_lines(report, None)
    text = "\n".join(lines)
    assert "THE-CAUSE cpus {3}" in text and all(len(line) <= 118 for line in lines if line.startswith(" " * 9))
    failed["reason"] = "x" * 5000
    assert "whole reason in report.json" in "\n".join(summary_lines(report, None))
