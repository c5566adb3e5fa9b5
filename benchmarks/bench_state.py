"""Cost of persisting one admission in the driver SDK's checkpoint, by the number of live admissions.

Run: python benchmarks/bench_state.py [--samples N]
Target: flat in the number of live admissions (one journal record per change; compaction amortised).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cci_conformance.driver_sdk.state import StateStore  # noqa: E402


def admission_text(i: int) -> str:
    """About the size of one reference-driver admission entry."""
    d = {"namespace": "ns", "claim_uid": f"claim-{i:06d}", "claim_name": "cl", "pod": f"pod-{i:06d}",
         "container": "c", "resource_handle": json.dumps({"cores": ["2"], "cpu attributes": [["EXCLUSIVE"]]}),
         "container_id": f"cid-{i:06d}", "cgroup": "", "extra": {},
         "groups": [{"cpus": f"{i % 1024},{(i + 512) % 1024}", "exclusive": True, "withheld": ""}]}
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


def measure(live: int, samples: int) -> tuple[float, float, float]:
    root = Path(tempfile.mkdtemp(prefix="cci-", dir="/tmp"))
    store = StateStore(root, background_sync=False)
    try:
        store.load()
        for i in range(live):
            store.apply({f"k{i}": admission_text(i)})
        times = []
        for i in range(samples):  # admit + remove pairs keep the live count constant
            key = f"m{i}"
            start = time.perf_counter()
            store.apply({key: admission_text(live + i)})
            times.append((time.perf_counter() - start) * 1e6)
            store.apply({}, [key])
        ordered = sorted(times)
        return statistics.median(times), ordered[int(0.99 * (len(ordered) - 1))], statistics.mean(times)
    finally:
        store.close()
        shutil.rmtree(root)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--samples", type=int, default=2000)
    args = ap.parse_args()
    print(f"{'live':>6} {'p50 us':>8} {'p99 us':>8} {'mean us':>8}   (mean includes amortised compaction)")
    for live in (0, 100, 500, 2000):
        p50, p99, mean = measure(live, args.samples)
        print(f"{live:>6} {p50:>8.1f} {p99:>8.1f} {mean:>8.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
