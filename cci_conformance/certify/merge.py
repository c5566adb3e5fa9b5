"""One certificate from the reports of several runs (a CI matrix fanned out as jobs): every cell named, the verdict
their conjunction."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .outcomes import FAIL, NA, PASS, STATUSES, UNTESTED
from .report import (
    CERTIFIED,
    EXIT_CERTIFIED,
    EXIT_INVALID,
    EXIT_NOT_CERTIFIED,
    INVALID,
    NOT_CERTIFIED,
    load_report,
    validation_errors,
)

MERGED_BACKEND_SEPARATOR = "+"
# The reason outcomes.requirement_verdict gives when every test was not applicable on the run's machines.
TOPOLOGY_UNTESTED = "not applicable on any topology of this run"
DRIVER_KEYS = ("name", "version", "manifest_sha256")  # the driver of every cell must be the same one


def cell_name(report: dict) -> str:
    """backend:machines:kubernetes, the machines being a cluster run's nodes or a kind/embedded run's topologies."""
    run = report["run"]
    facts = run.get("backend_facts") or {}
    machines = [n["name"] for n in facts.get("nodes", [])] or [t["name"] for t in run.get("topologies", [])]
    kubernetes = facts.get("kubernetes")
    kubernetes = "/".join(kubernetes) if isinstance(kubernetes, list) else kubernetes
    profile = run.get("node_profile") or ""
    parts = [run["backend"], ",".join(machines) or "-", Path(profile).stem if profile else "-"]
    return ":".join(parts + ([kubernetes] if kubernetes else []))


def _cells(paths: list[Path]) -> list[tuple[str, Path, dict]]:
    out, seen = [], {}
    for path in paths:
        file = path / "report.json" if path.is_dir() else path
        if not file.is_file():
            raise ConfigError("no report.json here", file=str(path), field="DIR", fix="give a run's report directory")
        report = load_report(file)
        problems = validation_errors(report)
        if problems:
            raise ConfigError(f"not a valid report: {problems[0]}", file=str(file), fix="merge reports of this harness")
        name = cell_name(report)
        seen[name] = seen.get(name, 0) + 1
        out.append((name if seen[name] == 1 else f"{name}#{seen[name]}", file, report))
    return out


def conflicts(cells: list[tuple[str, Path, dict]]) -> list[str]:
    """Facts the cells must share and do not: the driver, the catalog's requirements, the schema."""
    problems = []
    first_name, _, first = cells[0]
    for name, _, report in cells[1:]:
        for key in DRIVER_KEYS:
            a, b = first["run"]["driver"].get(key), report["run"]["driver"].get(key)
            if a != b:
                problems.append(f"driver {key}: {a!r} in {first_name}, {b!r} in {name}")
        ids_a, ids_b = [r["id"] for r in first["requirements"]], [r["id"] for r in report["requirements"]]
        if ids_a != ids_b:
            problems.append(f"requirements: {first_name} and {name} were judged against different catalogs "
                            f"({sorted(set(ids_a) ^ set(ids_b))[:5]} in one only)")
    return problems


def merged_status(entries: list[tuple[str, str]]) -> str:
    """The conjunction of (status, reason) over the cells: a failure anywhere fails; a requirement a cell did not
    test is untested; one a cell's machines could not exercise (not applicable on any topology of that run) is
    as in one run over all the cells' machines: passed when another cell passed it, else untested."""
    statuses = [s for s, _ in entries]
    if FAIL in statuses:
        return FAIL
    na_topology = [s == UNTESTED and r.startswith(TOPOLOGY_UNTESTED) for s, r in entries]
    if any(s == UNTESTED and not na for (s, _), na in zip(entries, na_topology, strict=True)):
        return UNTESTED
    if PASS in statuses:
        return PASS
    return UNTESTED if any(na_topology) else NA


def _requirement(entries: list[tuple[str, dict]]) -> dict:
    base = dict(entries[0][1])
    status = merged_status([(e["status"], e["reason"]) for _, e in entries])
    reasons = [f"[{cell}] {e['reason']}" for cell, e in entries if e["reason"] and
               (e["status"] == status or status == PASS)]
    tests = [{**t, "nodeid": f"[{cell}] {t['nodeid']}"} for cell, e in entries for t in e["tests"]]
    figures = [{**f, "test": f"[{cell}] {f['test']}"} for cell, e in entries for f in e["figures"]]
    base.update(status=status, reason="; ".join(reasons), tests=tests, figures=figures)
    base.pop("replay", None)
    replays = [f"[{cell}] {e['replay']}" for cell, e in entries if e.get("replay")]
    if status == FAIL and replays:
        base["replay"] = "; ".join(replays)
    return base


def _counts(entries: list[dict]) -> dict[str, int]:
    return {s: sum(1 for e in entries if e["status"] == s) for s in STATUSES}


def merge(paths: list[Path]) -> dict:
    """The merged report (valid against report.schema.json); ConfigError when the reports cannot be one."""
    if len(paths) < 2:
        raise ConfigError("merging needs the reports of two runs or more", field="DIR", fix="name two directories")
    cells = _cells(paths)
    problems = conflicts(cells)
    if problems:
        raise ConfigError("the reports are not of one certification: " + "; ".join(problems), field="DIR",
                          fix="merge only runs of the same driver and catalog")
    reports = [r for _, _, r in cells]
    requirements = [_requirement([(name, report["requirements"][i]) for name, _, report in cells])
                    for i in range(len(reports[0]["requirements"]))]
    driver = [r for r in requirements if r["kind"] == "driver"]
    pre = [r for r in requirements if r["kind"] != "driver"]
    errors = [{**e, "where": f"[{name}] {e['where']}"} for name, _, report in cells for e in report["errors"]]
    complete = all(r["run"]["complete"] for r in reports)
    pre_failed = [r["id"] for r in pre if r["status"] == FAIL]
    pre_untested = [r["id"] for r in pre if r["required"] and r["status"] == UNTESTED]
    failed = [r["id"] for r in driver if r["required"] and r["status"] == FAIL]
    untested = [r["id"] for r in driver if r["required"] and r["status"] == UNTESTED]
    valid = not pre_failed
    certified = complete and not errors and valid and not pre_untested and not failed and not untested
    state = INVALID if not valid else CERTIFIED if certified else NOT_CERTIFIED
    other_modes = sorted(set().union(*(r["verdict"]["other_mode_requirements"] for r in reports)))
    verdict = {
        "certified": certified, "state": state,
        "exit_code": {CERTIFIED: EXIT_CERTIFIED, NOT_CERTIFIED: EXIT_NOT_CERTIFIED, INVALID: EXIT_INVALID}[state],
        "counts": _counts(driver), "failed_required": failed, "untested_required": untested,
        "failed_optional": [r["id"] for r in driver if not r["required"] and r["status"] == FAIL],
        "other_mode_requirements": other_modes,
        "preconditions": {"valid": valid, "counts": _counts(pre), "failed": pre_failed, "untested": pre_untested},
    }
    return {
        "schema_version": reports[0]["schema_version"],
        "run": _run(cells, complete),
        "verdict": verdict,
        "areas": [{**a, "counts": _counts([r for r in driver if r["area"] == a["key"]])} for a in reports[0]["areas"]],
        "requirements": requirements,
        "unmapped_tests": [{**t, "nodeid": f"[{name}] {t['nodeid']}"} for name, _, report in cells
                           for t in report["unmapped_tests"]],
        "errors": errors,
    }


def _run(cells: list[tuple[str, Path, dict]], complete: bool) -> dict:
    runs = [r["run"] for _, _, r in cells]
    base = dict(runs[0])
    backends = sorted({r["backend"] for r in runs})
    topologies = {t["name"]: t for r in runs for t in r["topologies"]}
    nodes = [n for r in runs for n in (r.get("backend_facts") or {}).get("nodes", [])]
    cell_facts = []
    for name, file, report in cells:
        run, facts = report["run"], report["run"].get("backend_facts") or {}
        entry = {"name": name, "report": str(file), "backend": run["backend"],
                 "topologies": [t["name"] for t in run["topologies"]],
                 "nodes": [n["name"] for n in facts.get("nodes", [])],
                 "driver": (facts.get("driver_image") or {}).get("reference"), "verdict": report["verdict"]["state"]}
        if facts.get("kubernetes"):
            entry["kubernetes"] = facts["kubernetes"]
        cell_facts.append(entry)
    base.update(
        complete=complete, interrupted=any(r["interrupted"] for r in runs),
        started=min(r["started"] for r in runs),
        finished=max((r["finished"] for r in runs if r.get("finished")), default=None),
        duration_s=round(sum(r["duration_s"] for r in runs), 3),
        topologies=list(topologies.values()), backend=MERGED_BACKEND_SEPARATOR.join(backends),
        backend_facts={"cells": cell_facts, **({"nodes": nodes} if nodes else {})},
        workers=max(r["workers"] for r in runs), pytest_args=[],
    )
    return base
