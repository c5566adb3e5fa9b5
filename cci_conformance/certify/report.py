"""Build report.json from the catalog and the test results, validate it against its schema, write it atomically."""

from __future__ import annotations

import json
import os
import tempfile
from functools import cache
from pathlib import Path

import jsonschema

from ..paths import REPORTS_DIR
from .catalog import Catalog
from .outcomes import STATUSES, TestResult, is_certified, requirement_verdict, results_by_requirement

SCHEMA_PATH = REPORTS_DIR / "schemas" / "report.schema.json"
SCHEMA_VERSION = 1
REPORT_FILE = "report.json"


def build_report(*, catalog: Catalog, results: dict[str, TestResult], run: dict, errors: list[dict],
                 complete: bool) -> dict:
    """The whole report: run metadata, one entry per catalog requirement, the verdict."""
    by_req = results_by_requirement(catalog, results)
    requirements = []
    statuses: dict[str, str] = {}
    for req in catalog.requirements:
        tests = by_req[req.id]
        verdict = requirement_verdict(req, tests, run.get("node_mode"))
        statuses[req.id] = verdict.status
        figures = [dict(fig, test=t.nodeid) for t in tests for fig in t.figures]
        requirements.append({
            "id": req.id, "area": req.area, "text": req.text, "source": req.source,
            "capability": req.capability, "required": req.required, "status": verdict.status,
            "reason": verdict.reason, "tests": [t.as_dict() for t in tests], "figures": figures,
        })
    areas = []
    for key, title in catalog.areas.items():
        counts = dict.fromkeys(STATUSES, 0)
        for entry in requirements:
            if entry["area"] == key:
                counts[entry["status"]] += 1
        areas.append({"key": key, "title": title, "counts": counts})
    mapped = {t["nodeid"] for entry in requirements for t in entry["tests"]}
    unmapped = [r.as_dict() for r in results.values() if r.nodeid not in mapped]
    certified = complete and not errors and is_certified(catalog, statuses)
    counts = {s: sum(1 for v in statuses.values() if v == s) for s in STATUSES}
    return {
        "schema_version": SCHEMA_VERSION,
        "run": dict(run, complete=complete),
        "verdict": {
            "certified": certified,
            "exit_code": 0 if certified else 1,
            "counts": counts,
            "failed_required": [r["id"] for r in requirements if r["required"] and r["status"] == "fail"],
            "untested_required": [r["id"] for r in requirements if r["required"] and r["status"] == "untested"],
            "failed_optional": [r["id"] for r in requirements if not r["required"] and r["status"] == "fail"],
            # certified for this node mode only: these apply in other modes (catalog ``modes``)
            "other_mode_requirements": [r.id for r in catalog.requirements
                                        if not r.applies_in(run.get("node_mode"))],
        },
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
