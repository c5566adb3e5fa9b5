"""Build report.json from the catalog and the test results, validate it against its schema, write it atomically."""

from __future__ import annotations

import json
import os
import tempfile
from functools import cache
from pathlib import Path

import jsonschema

from ..paths import REPORTS_DIR
from .catalog import DRIVER, NODE_PRECONDITION, Catalog
from .outcomes import FAIL, STATUSES, UNTESTED, TestResult, is_certified, requirement_verdict, results_by_requirement

SCHEMA_PATH = REPORTS_DIR / "schemas" / "report.schema.json"
SCHEMA_VERSION = 1
REPORT_FILE = "report.json"


EXIT_CERTIFIED, EXIT_NOT_CERTIFIED, EXIT_INVALID = 0, 1, 3  # docs/spec.md §4.4 (2: usage, 130: interrupt)
CERTIFIED, NOT_CERTIFIED, INVALID = "certified", "not-certified", "invalid"


def _counts(entries: list[dict]) -> dict[str, int]:
    return {s: sum(1 for e in entries if e["status"] == s) for s in STATUSES}


def _verdict(catalog: Catalog, requirements: list[dict], node_mode: str | None, complete: bool,
             errors: list[dict]) -> dict:
    """Driver requirements decide certification; node preconditions decide whether the run is valid at all."""
    driver = [r for r in requirements if r["kind"] != NODE_PRECONDITION]
    pre = [r for r in requirements if r["kind"] == NODE_PRECONDITION]
    statuses = {r["id"]: r["status"] for r in driver}
    pre_failed = [r["id"] for r in pre if r["status"] == FAIL]
    pre_untested = [r["id"] for r in pre if r["required"] and r["status"] == UNTESTED]
    # A failed precondition means the harness's own node misbehaved: nothing the run saw can be blamed
    # on (or credited to) the driver, so the run is invalid rather than the driver failed.
    valid = not pre_failed
    certified = (complete and not errors and valid and not pre_untested
                 and is_certified(catalog, statuses, kind=DRIVER))
    state = INVALID if not valid else CERTIFIED if certified else NOT_CERTIFIED
    return {
        "certified": certified,
        "state": state,
        "exit_code": {CERTIFIED: EXIT_CERTIFIED, NOT_CERTIFIED: EXIT_NOT_CERTIFIED, INVALID: EXIT_INVALID}[state],
        "counts": _counts(driver),  # the driver's requirements only
        "failed_required": [r["id"] for r in driver if r["required"] and r["status"] == FAIL],
        "untested_required": [r["id"] for r in driver if r["required"] and r["status"] == UNTESTED],
        "failed_optional": [r["id"] for r in driver if not r["required"] and r["status"] == FAIL],
        # certified for this node mode only: these apply in other modes (catalog ``modes``)
        "other_mode_requirements": [r.id for r in catalog.requirements if not r.applies_in(node_mode)],
        "preconditions": {"valid": valid, "counts": _counts(pre), "failed": pre_failed, "untested": pre_untested},
    }


def build_report(*, catalog: Catalog, results: dict[str, TestResult], run: dict, errors: list[dict],
                 complete: bool) -> dict:
    """The whole report: run metadata, one entry per catalog requirement, the verdict."""
    by_req = results_by_requirement(catalog, results)
    requirements = []
    for req in catalog.requirements:
        tests = by_req[req.id]
        verdict = requirement_verdict(req, tests, run.get("node_mode"))
        figures = [dict(fig, test=t.nodeid) for t in tests for fig in t.figures]
        entry = {
            "id": req.id, "area": req.area, "kind": req.kind, "text": req.text, "source": req.source,
            "capability": req.capability, "required": req.required, "status": verdict.status,
            "reason": verdict.reason, "tests": [t.as_dict() for t in tests], "figures": figures,
        }
        if verdict.replay:
            entry["replay"] = verdict.replay
        requirements.append(entry)
    areas = []
    for key, title in catalog.areas.items():  # the driver's requirements: preconditions are counted apart
        areas.append({"key": key, "title": title,
                      "counts": _counts([e for e in requirements if e["area"] == key and e["kind"] == DRIVER])})
    mapped = {t["nodeid"] for entry in requirements for t in entry["tests"]}
    unmapped = [r.as_dict() for r in results.values() if r.nodeid not in mapped]
    return {
        "schema_version": SCHEMA_VERSION,
        "run": dict(run, complete=complete),
        "verdict": _verdict(catalog, requirements, run.get("node_mode"), complete, errors),
        "areas": areas,
        "requirements": requirements,
        "unmapped_tests": unmapped,
        "errors": errors,
    }


@cache
def _validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


def validation_errors(report: dict) -> list[str]:
    """Every way ``report`` breaks reports/schemas/report.schema.json (empty when it is valid)."""
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in _validator().iter_errors(report)]


def write_json_atomic(path: Path, data: dict) -> None:
    """Write-then-rename, so a reader (or an interrupted run) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1, sort_keys=False, default=str)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_report(path: Path) -> dict:
    return json.loads(Path(path).read_text())
