"""The Go and the Python reference drivers side by side: startup to registration, admission p50/p99, memory.

Run: python benchmarks/bench_drivers.py [--topology NAME ...] [--samples N] [--live N] [--starts N]
Both drivers run on the same rendered machine, one after the other, through the same client (issue 13).
Latency is the client's round trip of CCIAdmit over the unix socket (what the node waits for); startup
is process start until GetInfo answers on the registration socket; memory is the driver process's
resident set (VmRSS) after the admissions, and its peak (VmHWM).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cci_conformance.cpuset import format_cpulist, parse_cpulist  # noqa: E402
from cci_conformance.drivers.client import LocalDriver  # noqa: E402
from cci_conformance.drivers.manifest import load_manifest  # noqa: E402
from cci_conformance.paths import REFERENCE_DRIVER_DIR  # noqa: E402
from cci_conformance.topology import library  # noqa: E402

DRIVERS = {"python": REFERENCE_DRIVER_DIR, "go": REFERENCE_DRIVER_DIR.parent / "go-reference"}
MEASURED = {"cores": ["2"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-PREFERRED"]],
            "mem attributes": ["NUMA-MEM-AFFINITY-BIND-PREFERRED"]}


def percentile(values: list[float], p: float) -> float:
    """Nearest rank, as the certification's latency budgets (docs/spec.md 4.5)."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, -(-len(ordered) * p // 100) - 1))]


def memory_kib(pid: int) -> tuple[int, int]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def fill(driver: LocalDriver, live: int) -> frozenset[int]:
    """``live`` allocations: 60% exclusive 1-CPU, the rest shared 2-CPU; returns the CPUs withheld."""
    held: frozenset[int] = frozenset()
    for i in range(live):
        exclusive = i % 5 < 3
        claim = {"cores": ["1" if exclusive else "2"], "cpu attributes": [["EXCLUSIVE" if exclusive else "SHARED"]]}
        reply = driver.client.admit(pod=f"live-{i}", container="c", claim_uid=f"live-{i}", claim=claim,
                                    available=driver.topology.online_cpus - held)
        if reply.err:
            raise SystemExit(f"could not set up live allocation {i}: {reply.err}")
        driver.client.add(pod=f"live-{i}", container="c", container_id=f"live-{i}")
        if exclusive:
            held |= parse_cpulist(reply.rSet.cpuset)
    return held


def measure(kind: str, topology_name: str, samples: int, live: int, starts: int) -> dict[str, float]:
    topology = library.load(topology_name)
    with LocalDriver(load_manifest(DRIVERS[kind]), topology) as driver:  # the first start builds (Go)
        startup = []
        for _ in range(starts):
            driver.process.terminate()
            began = time.perf_counter()
            driver.start()
            startup.append((time.perf_counter() - began) * 1000)
        held = fill(driver, live)
        available = format_cpulist(topology.online_cpus - held)  # formatted once: time the driver, not the client
        for i in range(20):  # warm-up: connection, caches
            driver.client.admit(pod=f"w{i}", container="c", claim_uid=f"w{i}", claim=MEASURED, available=available)
            driver.client.remove(claim_uid=f"w{i}", container_id="")
        times = []
        for i in range(samples):
            began = time.perf_counter()
            reply = driver.client.admit(pod=f"m{i}", container="c", claim_uid=f"m{i}", claim=MEASURED,
                                        available=available)
            times.append((time.perf_counter() - began) * 1000)
            if reply.err:
                raise SystemExit(f"{kind}: measured admission failed: {reply.err}")
            driver.client.remove(claim_uid=f"m{i}", container_id="")
        rss, peak = memory_kib(driver.process.pid)
    return {"start_ms": statistics.median(startup), "p50_ms": percentile(times, 50), "p99_ms": percentile(times, 99),
            "rss_mib": rss / 1024, "peak_mib": peak / 1024}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topology", nargs="*", default=["server-2s8c-smt2-intel", "scale-8s-1024"])
    ap.add_argument("--samples", type=int, default=300, help="measured admissions per driver and topology")
    ap.add_argument("--live", type=int, default=20, help="live allocations held while measuring")
    ap.add_argument("--starts", type=int, default=5, help="measured starts per driver and topology (median)")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {args.samples} admissions, "
          f"{args.live} live allocations, median of {args.starts} starts per row")
    print(f"{'topology':<24} {'cpus':>5} {'driver':<7} {'start ms':>9} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'RSS MiB':>8} {'peak MiB':>9}")
    for name in args.topology:
        for kind in DRIVERS:
            r = measure(kind, name, args.samples, args.live, args.starts)
            print(f"{name:<24} {len(library.load(name).cpus):>5} {kind:<7} {r['start_ms']:>9.1f} {r['p50_ms']:>8.3f} "
                  f"{r['p99_ms']:>8.3f} {r['rss_mib']:>8.1f} {r['peak_mib']:>9.1f}", flush=True)
    print(f"load average now {os.getloadavg()[0]:.1f}: on a shared machine p99 includes scheduling delay")
    return 0


if __name__ == "__main__":
    sys.exit(main())
