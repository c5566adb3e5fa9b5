"""NodePrepareResources time of DRA CPU drivers on kind, as the kubelet measures it, side by side per machine.

Run: python benchmarks/bench_dra_prepare.py [--driver DIR ...] [--topology NAME ...] [--device-mode MODE ...]
Default: our reference (drivers_under_test/dra-reference) and dra-driver-cpu v0.2.0 on laptop-1s4c-smt2 and
server-2s8c-smt2-intel. For each pair it runs LAT-601's test alone (`cci-conformance run --driver DIR --topology T
-k test_node_prepare`: at least 100 claimed pods, one at a time, on the vanilla kubelet v1.37.2, policy none) and
prints the figures the test records from the kubelet's `dra_operations_duration_seconds` histogram: the calls, the
mean (exact: the histogram's sum over its count), p50 and p99 as the upper bound of their bucket (the kubelet's
lowest bucket is 100 ms, so a fast driver reads "<= 100 ms"), claimed-pod start p99, and the host's load per CPU,
since kind's nodes share this host's CPUs. Needs Docker and the v1.37.2 node image; minutes per pair.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DRIVERS = [ROOT / "drivers_under_test" / "dra-reference", ROOT / "drivers_under_test" / "dra-driver-cpu"]
TOPOLOGIES = ["laptop-1s4c-smt2", "server-2s8c-smt2-intel"]
TIMEOUT_S = 3600
# LAT-601's figures in the table's order; the counts and the load are plain numbers, the rest seconds
FIGURES = ("node_prepare_calls", "node_prepare_mean", "node_prepare_p50_le", "node_prepare_p99_le",
           "claimed_pod_start_p99", "host_load_per_cpu")
PLAIN = {"node_prepare_calls", "host_load_per_cpu"}


def measure(driver: Path, topology: str, mode: str = "individual") -> tuple[dict[str, float], float, str]:
    """LAT-601's figures of one run, its wall time and LAT-601's status (or why there is none)."""
    report_dir = Path(tempfile.mkdtemp(prefix="cci-bench-dra-"))
    argv = [sys.executable, "-m", "cci_conformance", "run", "--driver", str(driver), "--topology", topology,
            "--device-mode", mode, "-k", "test_node_prepare", "--report-dir", str(report_dir)]
    start = time.perf_counter()
    try:
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        took = time.perf_counter() - start
        path = report_dir / "report.json"
        if not path.is_file():
            return {}, took, f"no report (exit {done.returncode}): {done.stderr.strip()[-300:]}"
        report = json.loads(path.read_text())
    finally:
        subprocess.run(["rm", "-rf", str(report_dir)], check=False)
    lat = next((r for r in report["requirements"] if r["id"] == "LAT-601"), None)
    if lat is None:
        return {}, took, "LAT-601 not in the report"
    figures = {f["name"]: f["value"] for f in lat.get("figures", []) if f.get("topology", topology) == topology}
    return figures, took, lat["status"]


def show(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.1f} ms" if unit == "s" else f"{value:g}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--driver", action="append", type=Path, help="a dra/v1 driver folder (repeatable)")
    parser.add_argument("--topology", action="append", help="a machine of the library (repeatable)")
    parser.add_argument("--device-mode", action="append", choices=("individual", "grouped"),
                        help="the drivers' --cpu-device-mode (repeatable; default individual)")
    args = parser.parse_args()
    one, five, _ = os.getloadavg()
    print(f"start: load average {one:.1f} (5 min {five:.1f}) on {len(os.sched_getaffinity(0))} usable CPUs")
    print("driver | mode | machine | calls | mean | p50 <= | p99 <= | pod start p99 | host load/CPU | LAT-601 | wall")
    for driver in args.driver or DRIVERS:
        for mode in args.device_mode or ["individual"]:
            for topology in args.topology or TOPOLOGIES:
                figures, took, status = measure(driver, topology, mode)
                cells = [show(figures.get(name), "" if name in PLAIN else "s") for name in FIGURES]
                print(f"{driver.name} | {mode} | {topology} | {' | '.join(cells)} | {status} | {took:.0f} s",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
