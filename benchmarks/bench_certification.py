"""The figures of issue 27's table: how long a default certification, the test command and CI's parts take here.

Run: python benchmarks/bench_certification.py [--tests] [--kind] [--dra]
Always: `cci-conformance run` with every default (embedded backend, three topologies, workers as `run` picks
them), started cold: a new process, a new report folder, the driver and node processes started by the run.
--tests: the README's test command (`pytest -n 2` in the project root). --kind: `run --backend kind` on the
two machines of `.ci/run` with -n 2 (needs the node image). --dra: the DRA CPU driver's default run on kind.
Prints one line per figure (wall seconds, verdict or pass counts, the target) and the host's CPU count and
load average at the start and end, since a loaded host is slower than the table's idle one.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "cci_conformance"]
KIND_MACHINES = ["server-2s8c-smt2-intel", "laptop-1s4c-smt2"]  # .ci/run's
DRA_DRIVER = ROOT / "drivers_under_test" / "dra-driver-cpu"
TIMEOUT_S = 7200
TARGETS = {"run": 60, "kind": 900, "dra": 900, "tests": 720}  # seconds, issue 27


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (5 min {five:.1f}) on {len(os.sched_getaffinity(0))} usable CPUs"


def host_speed() -> str:
    """One single-core figure to compare hosts by: a fixed pure-Python loop (the harness's tests are mostly Python
    processes). Printed since 2026-12-07, when a new host ran it in 2.96 s and the test command in 1042 s, against
    684-781 s on the host of the day before, whose loop figure was not recorded. It says how fast one core was
    just then, not what a run will measure: a host timed at 0.88 s measured an 11.8 ms median on kind where hosts
    timed alike had measured 4-8 ms (docs/ci.md)."""
    start = time.perf_counter()
    total = 0
    for i in range(20_000_000):
        total += i
    return f"20M-addition Python loop {time.perf_counter() - start:.2f} s"


def timed(argv: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    return done, time.perf_counter() - start


def certification(label: str, target: str, extra: list[str]) -> None:
    """One `cci-conformance run`; its wall time, verdict, workers and slowest requirements from report.json."""
    report_dir = Path(tempfile.mkdtemp(prefix="cci-bench-cert-"))
    try:
        done, took = timed([*CLI, "run", "--report-dir", str(report_dir), *extra])
        report_path = report_dir / "report.json"
        if not report_path.is_file():
            print(f"{label}: {took:.1f} s, exit {done.returncode}, no report: {done.stderr.strip()[-400:]}")
            return
        report = json.loads(report_path.read_text())
    finally:
        subprocess.run(["rm", "-rf", str(report_dir)], check=False)
    verdict, run = report["verdict"], report["run"]
    by_req = sorted(((sum(t["duration_s"] for t in r["tests"]), r["id"]) for r in report["requirements"]),
                    reverse=True)
    slowest = ", ".join(f"{rid} {s:.0f} s" for s, rid in by_req[:4])
    # a run that does not certify says which requirements did not pass: a driver's known failures (dra-driver-cpu
    # v0.2.0's, docs/measurements/dra.md) are then told apart from a regression without the deleted report
    not_passed = sorted(f"{r['id']} {r['status']}" for r in report["requirements"]
                        if r["status"] not in ("pass", "not-applicable"))
    print(f"{label}: {took:.1f} s wall (target <= {TARGETS[target]} s), exit {done.returncode}, "
          f"{verdict['state'].upper()}, {run['workers']} workers, ACCT-010 {run.get('stateful_examples')} examples "
          f"per topology; test time by requirement (summed over workers): {slowest}"
          + (f"; not passed: {', '.join(not_passed)}" if not_passed else ""), flush=True)


def test_command() -> None:
    """The README's test command, as it stands in the README."""
    done, took = timed([sys.executable, "-m", "pytest", "-n", "2", "-q", "-p", "no:cacheprovider"])
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr.strip()[-300:]
    counts = re.sub(r"=+", "", tail).strip()
    print(f"README test command (pytest -n 2): {took:.0f} s wall (target <= {TARGETS['tests']} s), exit "
          f"{done.returncode}: {counts}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", action="store_true", help="also time the README's test command (minutes)")
    parser.add_argument("--kind", action="store_true", help="also time the default two-machine kind run")
    parser.add_argument("--dra", action="store_true", help="also time the DRA CPU driver's default kind run")
    args = parser.parse_args()
    # with it set, the run and the test session give their processes a bytecode cache of their own
    # (cci_conformance/bytecode.py); without it Python caches beside the sources as usual
    bytecode = "set" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "not set"
    print(f"start: {load()}; {host_speed()}; PYTHONDONTWRITEBYTECODE {bytecode}", flush=True)
    certification("cci-conformance run (default, embedded)", "run", [])
    if args.kind:
        certification("cci-conformance run --backend kind (two machines, -n 2)", "kind",
                      ["--backend", "kind", "--topology", *KIND_MACHINES, "-n", "2"])
    if args.dra:
        certification("cci-conformance run --driver dra-driver-cpu (kind)", "dra", ["--driver", str(DRA_DRIVER)])
    if args.tests:
        test_command()
    print(f"end: {load()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
