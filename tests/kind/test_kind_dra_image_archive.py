"""kind: a DRA driver the way a vendor brings it: its own image archive in dra.image, the harness builds nothing.

Our reference DRA driver's archive comes from `cci-conformance driver image`; a manifest of its own names it in
dra.image and dra.program. The same archive is judged correct, and with one rule broken (dra.args: a mutant's flag)
judged failing on exactly that rule, by the tests of REG-601, CLAIM-601, CLAIM-602 and ROBUST-601 on one machine."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from readiness import skip_unless_kind_ready, skip_unless_opted_in

from cci_conformance.cli import main
from cci_conformance.drivers.manifest import load_manifest
from cci_conformance.kind.image import nodeimage, versions
from cci_conformance.paths import DRA_REFERENCE_DIR, SUITES_DIR

pytestmark = [pytest.mark.kind, pytest.mark.slow]

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "selftest"))
from certification_run import certify  # noqa: E402

TOPOLOGY = "laptop-1s4c-smt2"
REQUIREMENTS = {"REG-601", "CLAIM-601", "CLAIM-602", "ROBUST-601"}
RUN_TIMEOUT_S = 1800  # one cluster: created, the archive loaded, four tests, deleted (about 3 minutes here)
OPT_IN = "CCI_KIND_DRA_ARCHIVE"  # "1": run it (about 6 minutes on 2 cores; not part of CI's kind job)


@pytest.fixture(scope="module", autouse=True)
def kind_ready():
    skip_unless_opted_in(OPT_IN, "a DRA driver from its image archive", "about 6 minutes on 2 cores")
    skip_unless_kind_ready("a DRA driver from its image archive", nodeimage.default_image(versions.VANILLA))


@pytest.fixture(scope="module")
def vendor_folder(tmp_path_factory):
    """A folder holding the archive and a manifest that names it, as a vendor ships them."""
    folder = tmp_path_factory.mktemp("dra-vendor")
    assert main(["driver", "image", str(DRA_REFERENCE_DIR), "--out", str(folder / "driver.tar")]) == 0
    reference = load_manifest(DRA_REFERENCE_DIR)
    manifest = {"name": "dra-vendor", "version": "1.0.0", "protocol": "dra/v1", "capabilities": [],
                "dra": {"device_class": reference.dra_driver, "image": "driver.tar", "program": "/dra-reference"}}
    (folder / "driver.yaml").write_text(yaml.safe_dump(manifest))
    return folder


def _judged(folder: Path):
    catalog = yaml.safe_load((SUITES_DIR / "dra" / "requirements.yaml").read_text())["requirements"]
    tests = sorted(f"dra/{t}" for r in catalog if r["id"] in REQUIREMENTS for t in r["tests"])
    extra = ["--cci-backend", "kind", "--cci-catalog", str(SUITES_DIR / "dra" / "requirements.yaml"),
             "--cci-node-profile", str(SUITES_DIR / "dra" / "node-none.yaml")]
    return certify(folder, [TOPOLOGY], tests, extra, timeout=RUN_TIMEOUT_S)


def test_a_vendor_archive_is_loaded_as_is_and_judged(vendor_folder):
    result = _judged(vendor_folder)
    assert result.with_status("pass") == REQUIREMENTS, \
        {r: (result.statuses.get(r), result.reasons.get(r, "")[:300]) for r in REQUIREMENTS}
    assert result.exit_code == 0


def test_the_same_archive_with_a_rule_broken_fails_that_rule_alone(vendor_folder):
    manifest = yaml.safe_load((vendor_folder / "driver.yaml").read_text())
    manifest["dra"]["args"] = ["--mutant=short-claim"]  # CLAIM-601: pinned to one CPU fewer than its claim
    (vendor_folder / "driver.yaml").write_text(yaml.safe_dump(manifest))
    result = _judged(vendor_folder)
    assert result.with_status("fail") == {"CLAIM-601"}, \
        {r: (result.statuses.get(r), result.reasons.get(r, "")[:300]) for r in REQUIREMENTS}
    assert result.with_status("pass") == REQUIREMENTS - {"CLAIM-601"}
    assert result.exit_code == 1
