"""Every parametrized case of every suite needs the capabilities its claim parameters use (docs/spec.md S1.11).

A case that sends a driver a claim using an undeclared capability may be refused for that reason alone, which
is no failure of the driver: the case must carry ``@pytest.mark.needs`` (on its ``pytest.param``), so it is
not applicable there instead. The capabilities are read off the parameters by the library
(``capabilities.capabilities_used``), never listed by hand, and compared with what pytest collected."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from case_dump import OUT_ENV

from cci_conformance.certify.catalog import load_catalog
from cci_conformance.paths import PROJECT_ROOT, SUITES_DIR
from cci_conformance.protocol.capabilities import capabilities_used
from cci_conformance.protocol.claims import KEYS

CLAIM_ARGUMENT = "parameters"  # the suites' name for a parametrized claim argument


@pytest.fixture(scope="module")
def collected(tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("cases") / "cases.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]),
               **{OUT_ENV: str(out)})
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-p", "case_dump", str(SUITES_DIR), "--cci-driver",
                           str(PROJECT_ROOT / "drivers_under_test" / "reference")],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(out.read_text())


def claim_values(params: dict) -> list[tuple[str, object]]:
    """(argument, value) of every parameter that is claim parameters: the ``parameters`` argument, or a dict
    with a key of the four arrays."""
    return [(k, v) for k, v in params.items()
            if k == CLAIM_ARGUMENT or (isinstance(v, dict) and set(v) & set(KEYS))]


def test_every_parametrized_claim_needs_the_capabilities_it_uses(collected):
    with_claims = [c for c in collected if claim_values(c["params"])]
    # not vacuous: ROBUST-001's malformed cases are parametrized claims, some of them using capabilities
    assert len(with_claims) >= 10, [c["nodeid"] for c in collected if c["params"]]
    assert any(capabilities_used(v) for c in with_claims for _, v in claim_values(c["params"]))
    wrong = []
    for case in with_claims:
        used = {cap for _, value in claim_values(case["params"]) for cap in capabilities_used(value)}
        if used - set(case["needs"]):
            wrong.append(f"{case['nodeid']}: uses {sorted(used)}, needs {case['needs']}")
    assert not wrong, "add pytest.param(..., marks=pytest.mark.needs(...)): " + "; ".join(wrong)


def test_a_base_requirement_keeps_a_case_every_driver_is_sent(collected):
    """A requirement for every driver (capability null) must not be waived by its cases' needs: a driver declaring
    nothing would leave it untested (spec §4.3), so at least one case of each needs no capability."""
    base = {r.id for r in load_catalog().requirements if r.capability is None}
    by_req: dict[str, list[dict]] = {}
    for case in collected:
        for rid in case["requirements"]:
            by_req.setdefault(rid, []).append(case)
    waived = [rid for rid, cases in by_req.items() if rid in base and all(c["needs"] for c in cases)]
    assert not waived, f"every case of these base requirements needs a capability: {waived}"
