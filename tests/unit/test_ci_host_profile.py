"""CI's host-scaled latency profile (tools/ci/host_scaled_profile.py): times scaled, ratios kept, a valid profile."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

from cci_conformance.certify.budgets import load_budgets

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("host_scaled_profile", ROOT / "tools/ci/host_scaled_profile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_slower_host_gets_longer_times_a_lower_throughput_floor_and_the_same_ratios(tmp_path):
    tool = _tool()
    default = yaml.safe_load((ROOT / "profiles/latency/default.yaml").read_text())
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(tool.scaled(default, 2.5)))
    scaled, base = load_budgets(path), load_budgets("default")
    assert scaled.name == "default-host-x2-5"
    assert round(scaled.p50_s / base.p50_s, 6) == 2.5 and round(scaled.p99_s / base.p99_s, 6) == 2.5
    assert round(base.min_admissions_per_s / scaled.min_admissions_per_s, 6) == 2.5
    assert (scaled.max_topology_growth, scaled.max_load_growth, scaled.fill_fraction, scaled.min_samples) == \
        (base.max_topology_growth, base.max_load_growth, base.fill_fraction, base.min_samples)


def test_a_host_as_fast_as_the_reference_hosts_keeps_the_default_profile(tmp_path, monkeypatch, capsys):
    tool = _tool()
    monkeypatch.setattr(tool, "loop_seconds", lambda runs=1: 0.5)
    assert tool.main(str(tmp_path)) == 0
    assert capsys.readouterr().out.strip() == "default"
    assert not list(tmp_path.iterdir())
    monkeypatch.setattr(tool, "loop_seconds", lambda runs=1: 1.8)
    assert tool.main(str(tmp_path)) == 0
    assert load_budgets(capsys.readouterr().out.strip()).name == "default-host-x2-0"
