"""Latency profiles (profiles/latency/*.yaml): load, validate, and judge measured admission latencies."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import jsonschema
import yaml

from ..errors import ConfigError
from ..paths import PROFILES_DIR, REPORTS_DIR

LATENCY_PROFILES_DIR = PROFILES_DIR / "latency"
SCHEMA_PATH = REPORTS_DIR / "schemas" / "latency-profile.schema.json"
DEFAULT_PROFILE = "default"


@dataclass(frozen=True)
class Budgets:
    """The numbers a driver's admission path must meet; times in seconds."""

    name: str
    path: Path
    p50_s: float
    p99_s: float
    min_admissions_per_s: float
    fill_fraction: float
    max_topology_growth: float
    max_load_growth: float
    min_samples: int

    def as_dict(self) -> dict:
        return {"name": self.name, "file": str(self.path), "p50_ms": self.p50_s * 1e3, "p99_ms": self.p99_s * 1e3,
                "min_admissions_per_s": self.min_admissions_per_s, "fill_fraction": self.fill_fraction,
                "max_topology_p50_factor": self.max_topology_growth, "max_load_p50_factor": self.max_load_growth,
                "min_admissions": self.min_samples}


def percentile(samples: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100): a value that was actually measured."""
    if not samples:
        raise ValueError("percentile of no samples")
    ordered = sorted(samples)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


def profile_names() -> list[str]:
    return sorted(p.stem for p in LATENCY_PROFILES_DIR.glob("*.yaml"))


def resolve_profile(name_or_file: str | Path | None) -> Path:
    """A profile name (profiles/latency/NAME.yaml) or a file path; unknown names are a ConfigError."""
    value = str(name_or_file or DEFAULT_PROFILE)
    candidate = Path(value)
    if candidate.suffix in (".yaml", ".yml") or "/" in value:
        if not candidate.is_file():
            raise ConfigError("latency profile file not found", file=value, field="--profile",
                              fix="pass an existing YAML file or a profile name: " + ", ".join(profile_names()))
        return candidate
    path = LATENCY_PROFILES_DIR / f"{value}.yaml"
    if not path.is_file():
        raise ConfigError(f"unknown latency profile {value!r}", field="--profile",
                          fix="use one of: " + ", ".join(profile_names()) + ", or a YAML file path")
    return path


@cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))


def parse_budgets(data: object, path: Path) -> Budgets:
    errors = sorted(_validator().iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        err = errors[0]
        where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        raise ConfigError(err.message, file=str(path), field=where,
                          fix="see reports/schemas/latency-profile.schema.json and profiles/latency/default.yaml")
    if data["admission"]["p99_ms"] < data["admission"]["p50_ms"]:  # type: ignore[index]
        raise ConfigError("p99_ms is below p50_ms", file=str(path), field="admission.p99_ms",
                          fix="a 99th percentile budget cannot be tighter than the median budget")
    return Budgets(
        name=data["name"], path=path,  # type: ignore[index]
        p50_s=data["admission"]["p50_ms"] / 1e3, p99_s=data["admission"]["p99_ms"] / 1e3,  # type: ignore[index]
        min_admissions_per_s=float(data["throughput"]["min_admissions_per_s"]),  # type: ignore[index]
        fill_fraction=float(data["throughput"]["fill_fraction"]),  # type: ignore[index]
        max_topology_growth=float(data["growth"]["max_topology_p50_factor"]),  # type: ignore[index]
        max_load_growth=float(data["growth"]["max_load_p50_factor"]),  # type: ignore[index]
        min_samples=int(data["samples"]["min_admissions"]),  # type: ignore[index]
    )


def load_budgets(name_or_file: str | Path | None = None) -> Budgets:
    """Load a latency profile by name or file; every problem is a ConfigError."""
    path = resolve_profile(name_or_file)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML: {getattr(exc, 'problem', exc)}", file=str(path),
                          fix="correct the YAML syntax") from None
    return parse_budgets(data, path)


# LAT-004 (docs/spec.md §4.5): growth is judged from a base machine the run measures whatever topologies the
# user picked, so the requirement can fail on a single topology, the smallest one included.
GROWTH_DIRECT_RATIO = 2  # a run machine with at least this many times the base's CPUs is judged itself
GROWTH_PROBE_RATIO = 4  # else the smallest library machine with at least this many times the base's CPUs is


def growth_machines(topology, run_topologies=()) -> tuple:
    """``(base, probe)`` Topologies for LAT-004 on ``topology``: the base is the smallest machine (fewest CPUs,
    then name) of the library and the run; the probe is ``topology`` itself when it has at least
    GROWTH_DIRECT_RATIO times the base's CPUs, else the smallest library machine with GROWTH_PROBE_RATIO times:
    of the smallest, a machine of the run first (it is measured anyway), then by name."""
    from ..topology import library

    def size(t) -> tuple:
        return (len(t.cpus), t.name)

    machines = [library.load(n) for n in library.names()]
    base = min([*machines, *run_topologies, topology], key=size)
    if len(topology.cpus) >= GROWTH_DIRECT_RATIO * len(base.cpus):
        return base, topology
    in_run = {t.name for t in run_topologies}
    larger = [t for t in machines if len(t.cpus) >= GROWTH_PROBE_RATIO * len(base.cpus)]
    # A run machine of the same size probes as well as any other, and its measurement is one the run makes
    # already: on kind a probe of its own was a node and a fill of several minutes more (docs/spec.md 4.5).
    return base, min(larger or machines, key=lambda t: (len(t.cpus), t.name not in in_run, t.name))
