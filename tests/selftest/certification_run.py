"""Run the conformance suites in a subprocess (as a vendor would) and read the verdicts from report.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cci_conformance.paths import PROJECT_ROOT

SUITES = PROJECT_ROOT / "suites"
RUN_TIMEOUT_S = 900


@dataclass(frozen=True)
class Certification:
    """The outcome of one run: requirement id -> status, and the reason of every non-pass."""

    statuses: dict[str, str]
    reasons: dict[str, str]
    exit_code: int
    seconds: float
    output: str
    evidence: dict[str, str]  # requirement id -> the node and driver log tails of its failed tests
    stopped_early: str | None = None  # the run's startup probe found no registered driver: no test ran
    figures: dict[str, str] | None = None  # requirement id -> its figures ("name=value; ..."), e.g. ACCT-010's seed

    def evidence_for(self, req_id: str) -> str:
        return self.evidence.get(req_id, "(no evidence collected)")

    def with_status(self, *statuses: str) -> set[str]:
        return {rid for rid, s in self.statuses.items() if s in statuses}


def certify(driver: Path, topologies: list[str], modules: list[str] | None = None,
            extra: list[str] | None = None, timeout: float = RUN_TIMEOUT_S) -> Certification:
    """``pytest suites/ --cci-driver DRIVER --cci-topology T...`` with a report dir of its own."""
    report_dir = Path(tempfile.mkdtemp(prefix="cci-selftest-", dir="/tmp"))
    targets = [str(SUITES / m) for m in modules] if modules else [str(SUITES)]
    argv = [sys.executable, "-m", "pytest", *targets, "-q", "-p", "no:cacheprovider", "--cci-driver", str(driver),
            "--cci-report-dir", str(report_dir), *[a for t in topologies for a in ("--cci-topology", t)],
            *(extra or [])]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    try:
        proc = subprocess.run(argv, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=timeout, env=env)
        report = json.loads((report_dir / "report.json").read_text())
        evidence = _log_tails(report, report_dir)  # read now: the report dir goes below
    finally:
        subprocess.run(["rm", "-rf", str(report_dir)], check=False)
    reqs = report["requirements"]
    return Certification(statuses={r["id"]: r["status"] for r in reqs},
                         reasons={r["id"]: r.get("reason", "") for r in reqs if r["status"] != "pass"},
                         exit_code=proc.returncode, seconds=report["run"].get("duration_s", 0.0),
                         output=proc.stdout[-4000:] + proc.stderr[-2000:], evidence=evidence,
                         stopped_early=report["run"].get("stopped_early"),
                         figures={r["id"]: "; ".join(f"{f.get('name')}={f.get('value')}" for f in r.get("figures", []))
                                  for r in reqs})


def _log_tails(report: dict, report_dir: Path, lines: int = 25) -> dict[str, str]:
    """For each failed requirement, the last lines of the logs its failed tests left as evidence."""
    out = {}
    for req in report["requirements"]:
        if req["status"] != "fail":
            continue
        parts = []
        for test in req["tests"]:
            for rel in test.get("evidence", []):
                path = report_dir / rel
                if path.name in ("node.log", "driver.log") and path.is_file():
                    tail = path.read_text(errors="replace").splitlines()[-lines:]
                    parts.append(f"--- {rel}\n" + "\n".join(tail))
        out[req["id"]] = "\n".join(parts)
    return out
