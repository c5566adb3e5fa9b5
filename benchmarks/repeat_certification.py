"""Certify the reference driver N times in a row and print whether every run gave the same verdicts.

Run: python benchmarks/repeat_certification.py [--runs 10] [--topology NAME ...] [-n WORKERS]
Prints one line per run (wall time, counts, verdict) and, at the end, IDENTICAL or the requirements
whose status or failing test differed between runs. Exit code 0 when identical, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one_run(topologies: list[str], workers: int) -> tuple[dict[str, str], dict[str, str], float]:
    report_dir = Path(tempfile.mkdtemp(prefix="cci-repeat-", dir="/tmp"))
    argv = [sys.executable, "-m", "pytest", str(ROOT / "suites"), "-q", "-p", "no:cacheprovider",
            "--cci-report-dir", str(report_dir), *[a for t in topologies for a in ("--cci-topology", t)]]
    if workers > 1:
        argv += ["-n", str(workers)]
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    took = time.perf_counter() - start
    report = json.loads((report_dir / "report.json").read_text())
    subprocess.run(["rm", "-rf", str(report_dir)], check=False)
    statuses = {r["id"]: r["status"] for r in report["requirements"]}
    # per test, so a flake that keeps the requirement's status (e.g. another test failing) shows too
    tests = {t["nodeid"]: t["outcome"] for r in report["requirements"] for t in r.get("tests", [])}
    return statuses, tests, took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--topology", action="append", default=None, help="repeatable (default: the run's defaults)")
    parser.add_argument("-n", "--workers", type=int, default=1)
    args = parser.parse_args()
    topologies = args.topology or []
    runs = []
    for i in range(args.runs):
        statuses, tests, took = one_run(topologies, args.workers)
        counts = {s: list(statuses.values()).count(s) for s in sorted(set(statuses.values()))}
        print(f"run {i + 1:2d}: {took:6.1f}s {counts}", flush=True)
        runs.append((statuses, tests))
    first_statuses, first_tests = runs[0]
    differing = sorted({rid for s, _ in runs[1:] for rid in first_statuses if s.get(rid) != first_statuses[rid]})
    flaky_tests = sorted({t for _, ts in runs[1:] for t in set(ts) | set(first_tests)
                          if ts.get(t) != first_tests.get(t)})
    if not differing and not flaky_tests:
        print(f"IDENTICAL: {args.runs} runs, {len(first_statuses)} requirements, {len(first_tests)} tests, "
              "same status every time")
        return 0
    print(f"DIFFERENT: requirements {', '.join(differing) or 'none'}; tests {', '.join(flaky_tests) or 'none'}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
