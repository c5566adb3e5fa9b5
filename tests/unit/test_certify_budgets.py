"""Latency profiles: the default loads with its documented numbers; percentiles; bad profiles are ConfigErrors."""

from __future__ import annotations

import pytest
import yaml

from cci_conformance.certify.budgets import LATENCY_PROFILES_DIR, load_budgets, percentile
from cci_conformance.errors import ConfigError


def test_default_profile():
    budgets = load_budgets()
    assert budgets.name == "default"
    assert budgets.p50_s == pytest.approx(0.010) and budgets.p99_s == pytest.approx(0.100)
    assert budgets.min_admissions_per_s == 50 and budgets.fill_fraction == 0.9
    assert budgets.max_topology_growth == 4.0 and budgets.max_load_growth == 3.0
    assert load_budgets(LATENCY_PROFILES_DIR / "default.yaml") == budgets


def test_nearest_rank_percentile_returns_a_measured_value():
    samples = [0.005, 0.001, 0.003, 0.002, 0.004]
    assert percentile(samples, 50) == 0.003
    assert percentile(samples, 99) == 0.005
    assert percentile(samples, 1) == 0.001
    assert percentile(list(range(1, 101)), 99) == 99
    with pytest.raises(ValueError):
        percentile([], 50)


def test_unknown_profile_lists_the_known_ones():
    with pytest.raises(ConfigError) as info:
        load_budgets("no-such")
    assert "default" in info.value.fix and info.value.field == "--profile"


@pytest.mark.parametrize("change, field", [
    (lambda d: d["admission"].update(p50_ms=-1), "admission.p50_ms"),
    (lambda d: d["admission"].update(p99_ms=1, p50_ms=5), "admission.p99_ms"),
    (lambda d: d["growth"].update(max_load_p50_factor=0.5), "growth.max_load_p50_factor"),
    (lambda d: d.update(colour="blue"), "(top level)"),
    (lambda d: d["throughput"].pop("fill_fraction"), "throughput"),
])
def test_bad_profiles_name_the_field(tmp_path, change, field):
    data = yaml.safe_load((LATENCY_PROFILES_DIR / "default.yaml").read_text())
    change(data)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as info:
        load_budgets(path)
    assert info.value.field == field and info.value.file == str(path)
