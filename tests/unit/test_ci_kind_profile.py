"""CI's kind latency profile (tools/ci/kind-latency.yaml): the default's ratios, fill and samples; looser times only."""

from __future__ import annotations

from pathlib import Path

from cci_conformance.certify.budgets import load_budgets

ROOT = Path(__file__).resolve().parents[2]


def test_ci_loosens_only_the_times_and_the_throughput_floor_and_keeps_every_ratio():
    ci, base = load_budgets(ROOT / "tools/ci/kind-latency.yaml"), load_budgets("default")
    assert ci.name != base.name  # a report judged by it says so
    assert (ci.max_topology_growth, ci.max_load_growth, ci.fill_fraction, ci.min_samples) == \
        (base.max_topology_growth, base.max_load_growth, base.fill_fraction, base.min_samples)
    assert round(ci.p50_s / base.p50_s, 6) == 3 and round(ci.p99_s / base.p99_s, 6) == 3
    assert round(base.min_admissions_per_s / ci.min_admissions_per_s, 1) == 3


def test_ci_runs_kind_with_that_profile():
    run = (ROOT / ".ci/run").read_text()
    assert "--profile tools/ci/kind-latency.yaml" in run
