"""A driver declaring no capability certifies, and so does one declaring a single capability, for each of them:
every requirement of what it declares passes, every other capability requirement is not applicable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from certification_run import certify

from cci_conformance.certify.catalog import load_catalog
from cci_conformance.certify.outcomes import capability_skip_reason
from cci_conformance.paths import PROJECT_ROOT
from cci_conformance.protocol.capabilities import OPTIONAL_CAPABILITIES

pytestmark = [pytest.mark.slow, pytest.mark.integration]

MINIMAL_DRIVER = PROJECT_ROOT / "drivers_under_test" / "examples" / "minimal"
CAPABILITIES_ENV = "MINIMAL_DRIVER_CAPABILITIES"  # drivers_under_test/examples/minimal/driver.py
# SMT (so DENIED would be sent if a suite forgot the capability) and two NUMA nodes (so would NUMA claims)
TOPOLOGY = "server-2s8c-smt2-intel"
# ACCT-010's random examples here: these runs prove what is applicable and that nothing undeclared is sent (each
# example's 20 steps draw from the same claim mix), not the exploration's depth, which is the certification's and
# the mutant self-test's (test_reference_certifies.py does the same): 10, not the default 30, took the examples
# from 22 s to about 7 s of each of these eight runs.
STATEFUL = ["--cci-stateful-examples", "10"]


def single_capability_driver(folder: Path, capability: str) -> Path:
    """The minimal driver, honouring ``capability`` as well, behind a manifest that declares just that one."""
    folder.mkdir(parents=True, exist_ok=True)
    args = [f"--{flag}={{{flag.replace('-', '_')}}}"
            for flag in ("registry-dir", "plugin-dir", "sysfs-root", "state-dir", "driver-name")]
    (folder / "driver.yaml").write_text(
        f"name: single-{capability}\nprotocol: cci/v1alpha1\ncapabilities: [{capability}]\n"
        f"env: {{{CAPABILITIES_ENV}: {capability}}}\n"
        f"local:\n  command: {json.dumps(['{python}', str(MINIMAL_DRIVER / 'driver.py'), *args])}\n"
        "startup_timeout_s: 15\n")
    return folder


def check_certifies_declaring(result, name: str, declared: set[str]) -> None:
    """Exactly the requirements of undeclared capabilities are not applicable (with the capability reason);
    every other one passes, and the run certifies."""
    catalog = load_catalog()
    optional = {r.id: r.capability for r in catalog.requirements if r.capability is not None}
    undeclared = {rid for rid, cap in optional.items() if cap not in declared}
    assert optional, "the catalog has no capability requirement"
    assert result.with_status("not-applicable") == undeclared, result.reasons
    for rid in undeclared:
        assert result.reasons[rid] == capability_skip_reason(name, optional[rid]), (rid, result.reasons[rid])
    assert result.with_status("pass") == set(result.statuses) - undeclared, result.reasons
    assert result.exit_code == 0, result.output


def test_minimal_driver_certifies_with_exactly_the_capability_requirements_not_applicable():
    """The base of docs/spec.md S1.11 is what the suites send a driver that declares nothing: the minimal driver
    refuses every other claim with an err, before anything else (malformed claims included), so a base test
    that sent one would fail here, and a base test marked with a capability would leave its requirement
    untested."""
    check_certifies_declaring(certify(MINIMAL_DRIVER, [TOPOLOGY], extra=STATEFUL), "minimal", set())


@pytest.mark.parametrize("capability", list(OPTIONAL_CAPABILITIES))
def test_a_driver_declaring_one_capability_certifies(capability, tmp_path):
    """A test that adapts to what a driver declares (e.g. sends CORE-SIBLING-DENIED when `core-siblings` is
    declared) must not send anything else with it: each single-capability driver refuses every claim that uses
    another capability."""
    driver = single_capability_driver(tmp_path / f"single-{capability}", capability)
    check_certifies_declaring(certify(driver, [TOPOLOGY], extra=STATEFUL), f"single-{capability}", {capability})
