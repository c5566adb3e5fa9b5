"""kind: each mutant of the reference DRA driver is caught on the vanilla kubelet by the requirements it targets."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml
from readiness import skip_unless_kind_ready, skip_unless_opted_in

from cci_conformance.kind.image import nodeimage, versions
from cci_conformance.paths import DRA_MUTANTS_DIR, SUITES_DIR

pytestmark = [pytest.mark.kind, pytest.mark.slow]

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "selftest"))
from certification_run import certify  # noqa: E402

TARGETS = yaml.safe_load((DRA_MUTANTS_DIR / "targets.yaml").read_text())
CATALOG = yaml.safe_load((SUITES_DIR / "dra" / "requirements.yaml").read_text())["requirements"]
RUN_TIMEOUT_S = 1800  # one cluster per profile: created, the driver built and loaded, the tests run, deleted
OPT_IN = "CCI_KIND_DRA_MUTANTS"  # "1": run them (about 5 minutes each on 2 cores: not part of CI)
# "grouped": the reference and its mutants run with --cpu-device-mode=grouped (a share of a NUMA node's capacity per
# claim, the CPUs picked by the driver: internal/alloc), and the suites read claims as docs/spec-dra.md S5.3 says
DEVICE_MODE = os.environ.get("CCI_KIND_DRA_DEVICE_MODE", "individual")


@pytest.fixture(scope="module", autouse=True)
def kind_ready():
    skip_unless_opted_in(OPT_IN, "kind DRA mutants", "about 5 minutes each on 2 cores")
    skip_unless_kind_ready("kind DRA mutants", nodeimage.default_image(versions.VANILLA))


def selected_tests(entry: dict) -> list[str]:
    """The tests of the mutant's targets and of the guards, as node ids below suites/ (dra/test_x.py::test_y)."""
    wanted = set(entry["targets"]) | set(entry.get("grouped_targets", ())) | set(TARGETS["guards"])
    return sorted({f"dra/{t}" for r in CATALOG if r["id"] in wanted for t in r["tests"]})


@pytest.mark.parametrize("name", sorted(TARGETS["mutants"]))
def test_dra_mutant_is_caught_on_kind_by_exactly_its_targets(name):
    entry = TARGETS["mutants"][name]
    extra = ["--cci-backend", "kind", "--cci-catalog", str(SUITES_DIR / "dra" / "requirements.yaml"),
             "--cci-node-profile", str(SUITES_DIR / "dra" / "node-none.yaml"), "--dra-device-mode", DEVICE_MODE]
    result = certify(DRA_MUTANTS_DIR / name, [entry["topology"]], selected_tests(entry), extra,
                     timeout=RUN_TIMEOUT_S)
    # a mutant whose fault reaches further in grouped mode says so (targets.yaml grouped_targets)
    targets = entry.get("grouped_targets", entry["targets"]) if DEVICE_MODE == "grouped" else entry["targets"]
    failed, expected = result.with_status("fail"), set(targets)
    missed = expected - failed
    assert not missed, f"{name} was not caught on kind by {sorted(missed)}: " + \
        "; ".join(f"{r}: {result.statuses.get(r)} {result.reasons.get(r, '')[:300]}" for r in sorted(missed))
    assert not failed - expected, f"{name} also failed {sorted(failed - expected)}: " + \
        "; ".join(result.reasons[r][:800] for r in sorted(failed - expected))
    guards = set(TARGETS["guards"]) - expected
    assert result.with_status("pass") >= guards, {g: result.statuses.get(g) for g in guards}
