"""Self-tests of the pytest plugin: example suites on the fake backend, checked through report.json."""

from __future__ import annotations

import json

import pytest
from example_suite import plugin_args, statuses, write_suite

from cci_conformance.certify.report import validation_errors

pytest_plugins = ["pytester"]


@pytest.fixture
def suite(pytester, monkeypatch):
    monkeypatch.setenv("CCI_FAKE_LOG", str(pytester.path / "sessions.log"))
    return write_suite(pytester.path)


def _report(root, name="out") -> dict:
    return json.loads((root / name / "report.json").read_text())


def _session_events(root) -> list[tuple[str, str]]:
    path = root / "sessions.log"
    return [tuple(line.split(" ", 1)) for line in path.read_text().splitlines()] if path.exists() else []


def test_every_status_lands_in_the_report(pytester, suite):
    result = pytester.runpytest_inprocess(*plugin_args(suite))
    result.assert_outcomes(passed=5, failed=2, skipped=3)
    report = _report(suite)
    assert validation_errors(report) == []
    assert statuses(report) == {"CLAIM-001": "pass", "CLAIM-006": "not-applicable", "CLAIM-009": "pass",
                                "ACCT-001": "pass", "ACCT-002": "untested", "ACCT-003": "fail"}
    by_id = {r["id"]: r for r in report["requirements"]}
    assert by_id["CLAIM-006"]["reason"] == "driver fake-driver does not declare capability core-siblings"
    assert by_id["ACCT-002"]["reason"] == "no test proves this requirement"
    # the catalog-listed test (no marker) counted for its requirement, on both topologies
    assert [t["outcome"] for t in by_id["ACCT-001"]["tests"]] == ["passed", "passed"]
    # one test is not applicable on the one-node laptop; the requirement still passed on the server, and says
    # which case it did not exercise (a plain "pass" would claim the laptop too)
    assert sorted(t["outcome"] for t in by_id["CLAIM-009"]["tests"]) == ["not-applicable", "passed"]
    assert by_id["CLAIM-009"]["reason"] == ("1 case not applicable: not applicable on this topology: laptop-1s4c-smt2 "
                                            "has one NUMA node (laptop-1s4c-smt2)")
    text = "\n".join(result.outlines)
    assert "CLAIM-009: pass, 1 case not applicable: not applicable on this topology" in text
    assert "pass, 1 case not applicable: not applicable on this topology" in (suite / "out" / "report.html").read_text()
    # a failure's rule is kept whole and first; its replay command has a field of its own everywhere
    acct = by_id["ACCT-003"]
    assert "END-OF-RULE" in acct["reason"] and "--seed" not in acct["reason"]
    assert acct["replay"] == "pytest test_example.py --seed=" + "7" * 300
    assert all(t["replay"] == acct["replay"] for t in acct["tests"])
    assert "replay: pytest test_example.py --seed=7777" in text  # the summary and the progress lines
    assert "END-OF-RULE" in text
    assert "replay: <code>pytest test_example.py --seed=7777" in (suite / "out" / "report.html").read_text()
    junit = (suite / "out" / "junit.xml").read_text()
    assert 'name="cci_replay" value="pytest test_example.py --seed=7777' in junit
    figures = by_id["CLAIM-001"]["figures"]
    assert {f["topology"] for f in figures} == {"laptop-1s4c-smt2", "server-2s8c-smt2-intel"}
    assert all(f["budget"] == 0.01 and f["samples"] == [0.001, 0.002, 0.0015] for f in figures)
    # an optional failure is shown but does not decide; the untested required one does
    assert report["verdict"]["failed_optional"] == ["ACCT-003"]
    assert report["verdict"]["untested_required"] == ["ACCT-002"]
    assert report["verdict"]["certified"] is False and report["run"]["complete"] is True
    assert report["run"]["driver"]["name"] == "fake-driver"
    assert [t["name"] for t in report["run"]["topologies"]] == ["laptop-1s4c-smt2", "server-2s8c-smt2-intel"]
    for name in ("junit.xml", "report.html", "environment.json", "driver/driver.yaml"):
        assert (suite / "out" / name).is_file(), name
    assert "<svg" in (suite / "out" / "report.html").read_text()


def test_a_failure_fails_its_requirement_with_evidence(pytester, suite):
    pytester.runpytest_inprocess(*plugin_args(suite, driver="leak"))
    report = _report(suite)
    acct = next(r for r in report["requirements"] if r["id"] == "ACCT-001")
    assert acct["status"] == "fail"
    assert "CPUs were not freed" in acct["reason"]
    for test in acct["tests"]:
        assert test["evidence"], test
        for rel in test["evidence"]:
            assert (suite / "out" / rel).is_file()
    assert 'href="evidence/' in (suite / "out" / "report.html").read_text().replace("'", '"')


def test_sessions_are_always_closed_and_replaced_after_a_failure(pytester, suite):
    pytester.runpytest_inprocess(*plugin_args(suite, driver="leak"))
    events = _session_events(suite)
    opened = [d for e, d in events if e == "open"]
    closed = [d for e, d in events if e == "close"]
    assert sorted(opened) == sorted(closed) and len(set(opened)) == len(opened)
    # two topologies, and the failing test_free and test_optional each left their node to be replaced
    assert len(opened) >= 4
    assert not any(__import__("os").path.exists(d) for d in opened)  # the short workdirs are gone
    assert len(list((suite / "out" / "sessions").iterdir())) == len(opened)


def test_a_driver_that_never_starts_stops_the_run_before_any_test_with_its_logs_kept(pytester, suite):
    result = pytester.runpytest_inprocess(*plugin_args(suite, driver="nostart"))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes()  # nothing ran: one message instead of one error per test
    assert len([line for line in result.outlines if line.startswith("[cci] STOPPED")]) == 1
    report = _report(suite)
    assert validation_errors(report) == []
    assert set(statuses(report).values()) == {"untested"} and report["verdict"]["exit_code"] == 1
    stopped = report["run"]["stopped_early"]
    assert "never registered" in stopped and "startup_timeout_s" in stopped
    assert [e["kind"] for e in report["errors"]] == ["driver-start"]
    kept = list((suite / "out" / "sessions").glob("*-failed-start/node.log"))
    assert kept, "the logs of a failed start must be kept in the bundle"


def test_a_driver_that_never_starts_stops_an_xdist_run_too(pytester, suite):
    result = pytester.runpytest_subprocess(*plugin_args(suite, driver="nostart"), "-n", "2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    report = _report(suite)
    assert set(statuses(report).values()) == {"untested"} and report["run"]["stopped_early"]
    assert not [t for r in report["requirements"] for t in r["tests"] if t["outcome"] != "missing"]


@pytest.mark.parametrize("marker, message", [
    ('@pytest.mark.requirement("NOPE-001")', "unknown requirement id 'NOPE-001'"),
    ('@pytest.mark.needs("teleport")', "unknown capability 'teleport'"),
])
def test_unknown_ids_and_capabilities_are_collection_errors(pytester, suite, marker, message):
    (suite / "test_bad.py").write_text(f"import pytest\n\n{marker}\ndef test_bad():\n    pass\n")
    result = pytester.runpytest_inprocess(*plugin_args(suite))
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*error during collection*"])
    report = _report(suite)
    assert report["errors"][0]["kind"] == "collection" and message in report["errors"][0]["message"]
    assert report["verdict"]["certified"] is False


def test_bad_configuration_is_a_usage_error(pytester, suite):
    (suite / "drivers" / "good" / "driver.yaml").write_text("name: x\nprotocol: cci/v1alpha1\ncapabilities: []\n"
                                                            "local: {command: [a]}\ncolour: blue\n")
    result = pytester.runpytest_inprocess(*plugin_args(suite))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown key 'colour'*"])


def test_xdist_aggregates_in_the_controller(pytester, suite):
    sequential = pytester.runpytest_inprocess(*plugin_args(suite, report="seq"))
    sequential.assert_outcomes(passed=5, failed=2, skipped=3)
    parallel = pytester.runpytest_subprocess(*plugin_args(suite, report="par"), "-n", "2")
    parallel.assert_outcomes(passed=5, failed=2, skipped=3)
    seq, par = _report(suite, "seq"), _report(suite, "par")
    assert statuses(par) == statuses(seq)
    assert validation_errors(par) == []
    assert par["run"]["workers"] == 2
    par_figures = next(r for r in par["requirements"] if r["id"] == "CLAIM-001")["figures"]
    assert len(par_figures) == 2  # figures travel from the workers with their reports


def test_an_interrupted_run_leaves_a_partial_report(pytester, suite):
    (suite / "test_zz_interrupt.py").write_text("def test_stop():\n    raise KeyboardInterrupt\n")
    result = pytester.runpytest_subprocess(*plugin_args(suite))
    assert result.ret == pytest.ExitCode.INTERRUPTED
    report = _report(suite)
    assert report["run"]["complete"] is False and report["run"]["interrupted"] is True
    assert statuses(report)["CLAIM-001"] == "pass"  # results before the interruption are kept
    assert report["verdict"]["certified"] is False


def test_the_report_identifies_the_driver_by_version_and_folder_digest(pytester, suite):
    from example_suite import manifest

    (suite / "drivers" / "good" / "driver.yaml").write_text(manifest(extra='version: "1.2.3"\n'))
    (suite / "drivers" / "good" / "policy.py").write_text("RULE = 1\n")
    pytester.runpytest_inprocess(*plugin_args(suite, report="first"))
    (suite / "drivers" / "good" / "policy.py").write_text("RULE = 2\n")  # same YAML, different driver
    pytester.runpytest_inprocess(*plugin_args(suite, report="second"))
    first, second = (_report(suite, name)["run"]["driver"] for name in ("first", "second"))
    assert first["version"] == "1.2.3"
    assert first["digest"]["of"] == "folder" and first["digest"]["files"] == 2
    assert first["manifest_sha256"] == second["manifest_sha256"]
    assert first["digest"]["value"] != second["digest"]["value"], "the digest must tell the two drivers apart"


NODE_FAULT_TESTS = """\
import pytest
from cci_conformance.backends.base import NodeFault


@pytest.mark.requirement("CLAIM-001")
def test_runtime_stalls(node):
    raise NodeFault("the runtime never started a sandbox")


@pytest.mark.requirement("ACCT-001")
def test_driver_fails(node):
    assert False, "a driver's real failure"
"""


def test_a_node_fault_leaves_its_requirement_untested_never_failed(pytester, monkeypatch):
    """A stalled runtime is the node's failure: the driver is not blamed, and the run does not certify."""
    monkeypatch.setenv("CCI_FAKE_LOG", str(pytester.path / "sessions.log"))
    root = write_suite(pytester.path, tests=NODE_FAULT_TESTS)
    pytester.runpytest_inprocess(*plugin_args(root))
    report = _report(root)
    assert validation_errors(report) == []
    by_id = {r["id"]: r for r in report["requirements"]}
    assert by_id["CLAIM-001"]["status"] == "untested"
    assert "the node failed, not the driver: the runtime never started a sandbox" in by_id["CLAIM-001"]["reason"]
    assert by_id["ACCT-001"]["status"] == "fail"  # a fault elsewhere does not excuse a real failure
    assert report["verdict"]["certified"] is False
