"""Node preconditions are reported apart from the driver's requirements; the certificate identifies what ran."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from test_certify_report import RUN

from cci_conformance.certify.bundle import folder_digest
from cci_conformance.certify.catalog import load_catalog, parse_catalog
from cci_conformance.certify.html import render_html
from cci_conformance.certify.junit import PRECONDITION_SUITE, split_preconditions
from cci_conformance.certify.outcomes import TestResult
from cci_conformance.certify.report import build_report, validation_errors
from cci_conformance.certify.summary import summary_lines
from cci_conformance.paths import MUTANTS_DIR


def _catalog():
    def req(rid, kind=None):
        return {"id": rid, "area": "accounting", "text": f"{rid} MUST hold.", "source": "KEP-3675 l.1",
                "capability": None, "required": True, "tests": [], **({"kind": kind} if kind else {})}

    return parse_catalog({"version": 1, "areas": {"accounting": "accounting"},
                          "requirements": [req("ACCT-001"), req("ACCT-004", "node-precondition")]}, Path("c.yaml"))


def _report(pre_outcome: str) -> dict:
    results = {"s/t.py::a[x]": TestResult("s/t.py::a[x]", "passed", requirements=["ACCT-001"]),
               "s/t.py::p[x]": TestResult("s/t.py::p[x]", pre_outcome, "pool wrong" if pre_outcome == "failed" else "",
                                          requirements=["ACCT-004"])}
    return build_report(catalog=_catalog(), results=results, run=dict(RUN), errors=[], complete=True)


def test_a_passed_precondition_is_not_counted_as_the_drivers_pass():
    report = _report("passed")
    assert validation_errors(report) == []
    verdict = report["verdict"]
    assert verdict["certified"] is True and verdict["state"] == "certified" and verdict["exit_code"] == 0
    assert verdict["counts"]["pass"] == 1, "only ACCT-001 is the driver's pass"
    assert report["areas"][0]["counts"]["pass"] == 1
    assert verdict["preconditions"] == {"valid": True, "counts": {"pass": 1, "fail": 0, "not-applicable": 0,
                                                                  "untested": 0}, "failed": [], "untested": []}
    assert {r["id"]: r["kind"] for r in report["requirements"]} == {"ACCT-001": "driver",
                                                                      "ACCT-004": "node-precondition"}
    text = "\n".join(summary_lines(report, None))
    assert "total" in text and "node preconditions  1 pass, 0 fail" in text
    total = next(line for line in text.splitlines() if line.startswith("total"))
    assert total.split()[1] == "1", total
    assert "node preconditions" in render_html(report)


def test_a_failed_precondition_makes_the_run_invalid_not_the_driver_failed():
    report = _report("failed")
    assert validation_errors(report) == []
    verdict = report["verdict"]
    assert verdict["state"] == "invalid" and verdict["exit_code"] == 3 and verdict["certified"] is False
    assert verdict["failed_required"] == [] and verdict["preconditions"]["failed"] == ["ACCT-004"]
    text = "\n".join(summary_lines(report, None))
    assert "verdict: INVALID RUN" in text and "(exit 3)" in text
    assert "INVALID RUN" in render_html(report)


def test_an_untested_precondition_cannot_certify():
    report = _report("skipped")
    assert report["verdict"]["certified"] is False and report["verdict"]["exit_code"] == 1
    assert report["verdict"]["preconditions"]["untested"] == ["ACCT-004"]


def test_the_catalogs_preconditions_are_exactly_the_node_obligations():
    import yaml

    obligations = set(yaml.safe_load((MUTANTS_DIR / "targets.yaml").read_text())["node_obligations"])
    assert {r.id for r in load_catalog().requirements if r.is_precondition} == obligations


def test_junit_keeps_precondition_testcases_in_a_suite_of_their_own(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="1" '
        'skipped="0" tests="3" time="3.0"><testcase classname="suites.test_accounting" name="test_a[x]" time="1"/>'
        '<testcase classname="suites.test_accounting" name="test_pool[x]" time="1"/>'
        '<testcase classname="suites.test_claims" name="test_b[x]" time="1"><failure message="no"/></testcase>'
        '</testsuite></testsuites>')
    moved = split_preconditions(junit, {"suites/test_accounting.py::test_pool[x]"})
    assert moved == 1
    suites = {s.get("name"): s for s in ET.parse(junit).getroot().findall("testsuite")}
    assert suites["pytest"].get("tests") == "2" and suites["pytest"].get("failures") == "1"
    assert [c.get("name") for c in suites[PRECONDITION_SUITE]] == ["test_pool[x]"]
    assert suites[PRECONDITION_SUITE].get("tests") == "1"


def test_the_driver_digest_covers_the_folder_and_ignores_caches(tmp_path):
    (tmp_path / "driver.yaml").write_text("name: x\n")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "policy.py").write_text("A = 1\n")
    first = folder_digest(tmp_path)
    assert first["files"] == 2 and len(first["value"]) == 64 and first["of"] == "folder"
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "policy.cpython-311.pyc").write_bytes(b"\0cache")
    (tmp_path / "lib" / "policy.cpython-311.pyc").write_bytes(b"\0cache")
    assert folder_digest(tmp_path) == first, "caches written by running the driver are not the driver"
    (tmp_path / "lib" / "policy.py").write_text("A = 2\n")
    assert folder_digest(tmp_path)["value"] != first["value"], "a changed driver file changes the digest"
    (tmp_path / "lib" / "policy.py").rename(tmp_path / "policy.py")
    (tmp_path / "policy.py").write_text("A = 1\n")
    assert folder_digest(tmp_path)["value"] != first["value"], "a moved file changes the digest"
