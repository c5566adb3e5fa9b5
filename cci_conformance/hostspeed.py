"""One single-core figure to compare hosts by: the seconds a fixed pure-Python loop takes (20M additions)."""

from __future__ import annotations

import time


def loop_seconds(runs: int = 1) -> float:
    """The best of ``runs`` timings of the loop (the least disturbed by whatever else runs on the host)."""
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        total = 0
        for i in range(20_000_000):
            total += i
        best = min(best, time.perf_counter() - start)
    return best
