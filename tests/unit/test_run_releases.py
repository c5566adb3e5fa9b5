"""`run --kubernetes A B`: a run per release, each in its own folder, one merged report named by release."""

from __future__ import annotations

import json

from test_report_merge import _catalog, _run  # one report builder for the merge tests and these

from cci_conformance.certify.outcomes import TestResult
from cci_conformance.certify.releases import certify_releases, release_dir
from cci_conformance.certify.report import build_report, write_json_atomic
from cci_conformance.certify.settings import RunSettings


def _fake_certify(outcomes: dict[str, dict[str, str]], seen: list[str], code: int = 0):
    def certify(settings: RunSettings, where) -> int:
        seen.append(settings.kubernetes)
        results = {f"t.py::{rid}": TestResult(f"t.py::{rid}", outcome, "" if outcome == "passed" else "broke",
                                              requirements=[rid])
                   for rid, outcome in outcomes[settings.kubernetes].items()}
        run = {**_run("smt4-2s", settings.kubernetes), "backend": "kind"}
        write_json_atomic(where / "report.json", build_report(catalog=_catalog(), results=results, run=run,
                                                              errors=[], complete=True))
        return code
    return certify


def test_each_release_runs_in_its_folder_and_the_merge_fails_where_one_release_fails(tmp_path, capsys):
    ok = {"CLAIM-601": "passed", "CLAIM-602": "passed", "CLAIM-603": "passed"}
    seen: list[str] = []
    code = certify_releases(RunSettings(), ("v1.36.3", "v1.37.2"), tmp_path,
                            _fake_certify({"v1.36.3": {**ok, "CLAIM-603": "failed"}, "v1.37.2": ok}, seen))
    assert seen == ["v1.36.3", "v1.37.2"] and code == 1
    assert (release_dir(tmp_path, "v1.36.3") / "report.json").is_file()
    merged = json.loads((tmp_path / "report.json").read_text())
    assert [c["kubernetes"] for c in merged["run"]["backend_facts"]["cells"]] == ["v1.36.3", "v1.37.2"]
    assert {r["id"]: r["status"] for r in merged["requirements"]}["CLAIM-603"] == "fail"
    assert "v1.36.3" in capsys.readouterr().out


def test_an_interrupt_ends_the_run_before_the_next_release(tmp_path):
    seen: list[str] = []
    ok = {"CLAIM-601": "passed", "CLAIM-602": "passed", "CLAIM-603": "passed"}
    code = certify_releases(RunSettings(), ("v1.36.3", "v1.37.2"), tmp_path,
                            _fake_certify({"v1.36.3": ok, "v1.37.2": ok}, seen, code=130))
    assert code == 130 and seen == ["v1.36.3"] and not (tmp_path / "report.json").exists()
