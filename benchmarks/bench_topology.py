"""Print how long rendering and reading back library topologies takes (median of several runs)."""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from cci_conformance.topology import library
from cci_conformance.topology.render import render
from cci_conformance.topology.scratch import scratch_parent
from cci_conformance.topology.sysfs_reader import read_sysfs

TARGETS = {"render": 2.0, "read": 1.0}  # seconds, for the 1024-CPU machine (issue 2)


def measure(name: str, parent: str, runs: int) -> dict[str, float]:
    topology = library.load(name)
    times: dict[str, list[float]] = {"render": [], "read": []}
    for _ in range(runs):
        out = Path(tempfile.mkdtemp(prefix="cci-bench-", dir=parent))
        try:
            start = time.perf_counter()
            render(topology, out)
            times["render"].append(time.perf_counter() - start)
            start = time.perf_counter()
            back = read_sysfs(out / "sys", name=name)
            times["read"].append(time.perf_counter() - start)
            if back != topology:
                raise SystemExit(f"{name}: read-back differs from the model")
        finally:
            shutil.rmtree(out, ignore_errors=True)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("names", nargs="*", default=["scale-8s-1024", "server-4s16c-smt2"])
    args = parser.parse_args()
    parents = {"temp dir": tempfile.gettempdir(), "memory fs": scratch_parent()}
    print(f"{'topology':<20} {'CPUs':>5} {'where':<10} {'render s':>9} {'read s':>7}   (median of {args.runs})")
    for name in args.names:
        cpus = len(library.load(name).cpus)
        for where, parent in parents.items():
            if where == "memory fs" and parent == parents["temp dir"]:
                continue
            m = measure(name, parent, args.runs)
            flags = ""
            if cpus >= 1024:
                flags = "  ".join(f"{k} {'OK' if m[k] < TARGETS[k] else 'OVER'} (<{TARGETS[k]:g}s)" for k in TARGETS)
            print(f"{name:<20} {cpus:>5} {where:<10} {m['render']:>9.3f} {m['read']:>7.3f}   {flags} [{parent}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
