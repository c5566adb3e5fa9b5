"""How many ACCT-010 examples each mutant it targets takes to be caught, over many first seeds.

Run: python benchmarks/bench_stateful_catch.py [--seeds 1-20] [--max-examples 400] [--mutant NAME ...]
     [--topology NAME] [-j 2]
For every mutant whose targets.yaml entry lists ACCT-010 (or each --mutant), runs ACCT-010 alone once per
first seed with up to --max-examples examples and reads from report.json the example in which it failed
(figure `stateful examples`). Prints one line per mutant (caught in how many seeds, the median, 90th
percentile and largest count) and the smallest fixed count that would have caught every seed measured:
the default (certify/settings.STATEFUL_EXAMPLES) must stay above that with margin.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
MUTANTS = ROOT / "drivers_under_test" / "mutants"
REQUIREMENT = "ACCT-010"
RUN_TIMEOUT_S = 1800


def acct010_mutants() -> dict[str, str]:
    """Mutant name -> the topology targets.yaml runs it on, for every mutant ACCT-010 must catch."""
    entries = yaml.safe_load((MUTANTS / "targets.yaml").read_text())["mutants"]
    return {name: e.get("topology") or e["topologies"][0] for name, e in entries.items()
            if REQUIREMENT in e["targets"]}


def seeds_of(text: str) -> list[int]:
    """"1-20" or "1,5,9" (or both, comma-separated) -> the seeds."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi) + 1)) if hi else [int(lo)]
    return out


def caught_at(mutant: str, topology: str, first_seed: int, max_examples: int) -> tuple[str, int]:
    """(status, examples): ACCT-010's status and the examples it ran, up to the failing one when it failed."""
    report_dir = Path(tempfile.mkdtemp(prefix="cci-catch-"))
    argv = [sys.executable, "-m", "pytest", str(ROOT / "suites" / "test_stateful.py"), "-q", "-p", "no:cacheprovider",
            "--cci-driver", str(MUTANTS / mutant), "--cci-topology", topology, "--cci-report-dir", str(report_dir),
            "--cci-stateful-examples", str(max_examples), f"--hypothesis-seed={first_seed}"]
    try:
        subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
        report = json.loads((report_dir / "report.json").read_text())
    finally:
        subprocess.run(["rm", "-rf", str(report_dir)], check=False)
    req = next(r for r in report["requirements"] if r["id"] == REQUIREMENT)
    examples = next((int(f["value"]) for f in req.get("figures", []) if f["name"] == "stateful examples"), -1)
    return req["status"], examples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1-20", help="first seeds: 1-20, or 3,7,11 (default: 1-20)")
    parser.add_argument("--max-examples", type=int, default=400, help="examples before a seed counts as missed")
    parser.add_argument("--mutant", action="append", default=None, help="repeatable (default: every ACCT-010 one)")
    parser.add_argument("--topology", default=None, help="override the mutant's targets.yaml topology")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="runs at once (default 1)")
    args = parser.parse_args()
    mutants = acct010_mutants()
    names = args.mutant or sorted(mutants)
    seeds = seeds_of(args.seeds)
    worst_all = 0
    print(f"{REQUIREMENT}: examples until caught, seeds {args.seeds}, at most {args.max_examples} examples")
    for name in names:
        topology = args.topology or mutants[name]
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(lambda s, n=name, t=topology: caught_at(n, t, s, args.max_examples), seeds))
        counts = [n for status, n in results if status == "fail"]
        missed = [s for s, (status, _) in zip(seeds, results, strict=True) if status != "fail"]
        by_seed = " ".join(f"{s}:{n if st == 'fail' else st}" for s, (st, n) in zip(seeds, results, strict=True))
        if counts:
            p90 = statistics.quantiles(counts, n=10)[-1] if len(counts) > 1 else counts[0]
            print(f"{name:28s} {topology:24s} caught {len(counts)}/{len(seeds)}; examples median "
                  f"{statistics.median(counts):g}, p90 {p90:g}, max {max(counts)}"
                  + (f"; missed seeds {missed}" if missed else ""), flush=True)
            worst_all = max(worst_all, max(counts))
        else:
            print(f"{name:28s} {topology:24s} caught 0/{len(seeds)}", flush=True)
        print(f"    per seed: {by_seed}", flush=True)
    print(f"smallest fixed count catching every caught seed: {worst_all}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
