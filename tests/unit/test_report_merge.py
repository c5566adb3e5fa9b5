"""`report merge`: one valid report from several runs, the verdict their conjunction, every cell named."""

from __future__ import annotations

from pathlib import Path

import pytest

from cci_conformance.certify.bundle import environment
from cci_conformance.certify.catalog import parse_catalog
from cci_conformance.certify.merge import cell_name, merge, merged_status
from cci_conformance.certify.outcomes import TestResult
from cci_conformance.certify.report import build_report, validation_errors, write_json_atomic
from cci_conformance.cli import main
from cci_conformance.errors import ConfigError


def _catalog():
    def req(rid, area):
        return {"id": rid, "area": area, "text": f"{rid} MUST hold.", "source": "kubelet DRA manager",
                "capability": None, "required": True, "tests": []}
    return parse_catalog({"version": 1, "areas": {"claims": "claims"},
                          "requirements": [req("CLAIM-601", "claims"), req("CLAIM-602", "claims"),
                                           req("CLAIM-603", "claims")]}, Path("catalog.yaml"))


def _run(node: str, kubernetes: str, driver: str = "dra-reference") -> dict:
    return {
        "interrupted": False, "started": "2026-01-01T00:00:00+00:00", "finished": "2026-01-01T00:10:00+00:00",
        "duration_s": 600.0, "harness_version": "0.1.0",
        "driver": {"name": driver, "version": "0.1.0", "manifest": "driver.yaml", "manifest_sha256": None,
                   "digest": None, "capabilities": []},
        "topologies": [{"name": node, "cpus": 2, "numa_nodes": 1}], "backend": "cluster",
        "backend_facts": {"kubernetes": kubernetes, "api_server": kubernetes,
                          "nodes": [{"name": node, "kubelet_version": kubernetes, "topology": {"cpus": "0-1"}}]},
        "node_profile": "suites/dra/node-none.yaml", "node_mode": None, "profile": None, "workers": 1,
        "pytest_args": [], "exit_status": 0,
        "environment": {k: v for k, v in environment().items() if k != "harness_version"},
    }


def _write(tmp_path: Path, name: str, outcomes: dict[str, str], **run) -> Path:
    results = {f"t.py::{rid}[{name}]": TestResult(f"t.py::{rid}[{name}]", outcome, "" if outcome == "passed"
                                                  else f"{rid} broke on {name}", requirements=[rid])
               for rid, outcome in outcomes.items()}
    report = build_report(catalog=_catalog(), results=results, run=_run(name, **run), errors=[], complete=True)
    assert validation_errors(report) == []
    write_json_atomic(tmp_path / name / "report.json", report)
    return tmp_path / name


def test_the_merged_verdict_is_the_conjunction_and_names_each_cell(tmp_path):
    a = _write(tmp_path, "w1", {"CLAIM-601": "passed", "CLAIM-602": "passed", "CLAIM-603": "not-applicable"},
               kubernetes="v1.37.2")
    b = _write(tmp_path, "w2", {"CLAIM-601": "passed", "CLAIM-602": "failed", "CLAIM-603": "passed"},
               kubernetes="v1.36.1")
    merged = merge([a, b])
    assert validation_errors(merged) == []
    status = {r["id"]: r for r in merged["requirements"]}
    assert status["CLAIM-601"]["status"] == "pass"
    assert status["CLAIM-603"]["status"] == "pass"  # not applicable on w1's machine, passed on w2
    assert status["CLAIM-602"]["status"] == "fail"
    assert status["CLAIM-602"]["reason"] == "[cluster:w2:node-none:v1.36.1] t.py::CLAIM-602[w2]: CLAIM-602 broke on w2"
    assert [t["nodeid"] for t in status["CLAIM-601"]["tests"]] == \
        ["[cluster:w1:node-none:v1.37.2] t.py::CLAIM-601[w1]", "[cluster:w2:node-none:v1.36.1] t.py::CLAIM-601[w2]"]
    assert merged["verdict"]["state"] == "not-certified" and merged["verdict"]["failed_required"] == ["CLAIM-602"]
    cells = merged["run"]["backend_facts"]["cells"]
    assert [(c["name"], c["verdict"], c["kubernetes"]) for c in cells] == \
        [("cluster:w1:node-none:v1.37.2", "not-certified", "v1.37.2"),  # CLAIM-603 untested on its machine
         ("cluster:w2:node-none:v1.36.1", "not-certified", "v1.36.1")]
    assert [n["name"] for n in merged["run"]["backend_facts"]["nodes"]] == ["w1", "w2"]


def test_two_passing_runs_merge_into_a_certificate(tmp_path):
    dirs = [_write(tmp_path, n, {"CLAIM-601": "passed", "CLAIM-602": "passed", "CLAIM-603": "passed"},
                   kubernetes="v1.37.2") for n in ("w1", "w2")]
    assert merge(dirs)["verdict"]["certified"] is True
    assert main(["report", "merge", *map(str, dirs), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "report.json").is_file()


def test_an_untested_cell_leaves_the_requirement_untested_not_passed():
    machine = "not applicable on any topology of this run: w1 has one NUMA node"
    assert merged_status([("pass", ""), ("untested", "1 of 1 tests did not run")]) == "untested"
    assert merged_status([("pass", ""), ("fail", "x"), ("untested", "y")]) == "fail"
    assert merged_status([("not-applicable", "a"), ("not-applicable", "b")]) == "not-applicable"
    assert merged_status([("not-applicable", "a"), ("pass", "")]) == "pass"
    # a cell whose machine cannot exercise it, as one run over both cells' machines would judge it
    assert merged_status([("untested", machine), ("pass", "")]) == "pass"
    assert merged_status([("untested", machine), ("untested", machine)]) == "untested"


def test_reports_of_different_drivers_are_refused_naming_the_conflict(tmp_path):
    a = _write(tmp_path, "w1", {"CLAIM-601": "passed"}, kubernetes="v1.37.2")
    b = _write(tmp_path, "w2", {"CLAIM-601": "passed"}, kubernetes="v1.37.2", driver="dra-driver-cpu")
    with pytest.raises(ConfigError, match="driver name: 'dra-reference' in .*w1.*'dra-driver-cpu' in .*w2"):
        merge([a, b])
    assert main(["report", "merge", str(a), str(b), "--out", str(tmp_path / "out")]) == 2


def test_a_directory_without_a_report_and_a_single_report_are_refused(tmp_path):
    a = _write(tmp_path, "w1", {"CLAIM-601": "passed"}, kubernetes="v1.37.2")
    with pytest.raises(ConfigError, match="two"):
        merge([a])
    with pytest.raises(ConfigError, match="no report.json"):
        merge([a, tmp_path / "nothing"])


def test_the_same_cell_twice_is_told_apart(tmp_path):
    a = _write(tmp_path / "1", "w1", {"CLAIM-601": "passed"}, kubernetes="v1.37.2")
    b = _write(tmp_path / "2", "w1", {"CLAIM-601": "passed"}, kubernetes="v1.37.2")
    names = [c["name"] for c in merge([a, b])["run"]["backend_facts"]["cells"]]
    assert names == ["cluster:w1:node-none:v1.37.2", "cluster:w1:node-none:v1.37.2#2"]
    assert cell_name({"run": {"backend": "kind", "topologies": [{"name": "laptop"}], "node_profile": None}}) == \
        "kind:laptop:-"
