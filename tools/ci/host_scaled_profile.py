"""Write the default latency profile scaled to this host's single-core speed, for CI's kind step; print its path."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from cci_conformance.hostspeed import loop_seconds

# The single-core figure bench_certification.py prints (cci_conformance.hostspeed) on the fast 2-core hosts where
# the default budgets were met with margin on kind (0.67-0.88 s; the reference's median 4-8 ms against 10 ms).
REFERENCE_LOOP_S = 0.9


def scaled(profile: dict, factor: float) -> dict:
    """Times multiplied by ``factor``, the throughput floor divided by it; ratios (growth) and sizes unchanged."""
    out = {**profile, "name": f"{profile['name']}-host-x{factor:.1f}".replace(".", "-")}
    out["description"] = (f"{profile['name']} with its times scaled {factor:.1f}x to a host whose single-core loop "
                          f"took that much longer than {REFERENCE_LOOP_S} s (CI's kind step; .ci/run)")
    out["admission"] = {k: round(v * factor, 3) for k, v in profile["admission"].items()}
    out["throughput"] = {**profile["throughput"],
                         "min_admissions_per_s": round(profile["throughput"]["min_admissions_per_s"] / factor, 3)}
    return out


def main(out_dir: str) -> int:
    loop = loop_seconds(runs=3)
    factor = max(1.0, loop / REFERENCE_LOOP_S)
    print(f"host single-core loop {loop:.2f} s: latency budgets scaled {factor:.1f}x", file=sys.stderr)
    if factor == 1.0:
        print("default")
        return 0
    default = yaml.safe_load((Path(__file__).resolve().parents[2] / "profiles/latency/default.yaml").read_text())
    path = Path(out_dir) / "host-scaled-latency.yaml"
    path.write_text(yaml.safe_dump(scaled(default, factor), sort_keys=False))
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
