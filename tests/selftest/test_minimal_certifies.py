"""A driver declaring no capability certifies: every base requirement passes, every other one is not applicable."""

from __future__ import annotations

import pytest
from certification_run import certify

from cci_conformance.certify.catalog import load_catalog
from cci_conformance.certify.outcomes import capability_skip_reason
from cci_conformance.paths import PROJECT_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.integration]

MINIMAL_DRIVER = PROJECT_ROOT / "drivers_under_test" / "examples" / "minimal"
# SMT (so DENIED would be sent if a suite forgot the capability) and two NUMA nodes (so would NUMA claims)
TOPOLOGY = "server-2s8c-smt2-intel"


def test_minimal_driver_certifies_with_exactly_the_capability_requirements_not_applicable():
    """The base of docs/spec.md S1.11 is what the suites send a driver that declares nothing: the minimal driver
    refuses every other claim with an err, so a base test that sent one would fail here, and a base test marked
    with a capability would leave its requirement untested."""
    result = certify(MINIMAL_DRIVER, [TOPOLOGY])
    catalog = load_catalog()
    optional = {r.id: r.capability for r in catalog.requirements if r.capability is not None}
    assert optional, "the catalog has no capability requirement"
    assert result.with_status("not-applicable") == set(optional), result.reasons
    for rid, cap in optional.items():
        assert result.reasons[rid] == capability_skip_reason("minimal", cap), (rid, result.reasons[rid])
    assert result.with_status("pass") == set(result.statuses) - set(optional), result.reasons
    assert result.exit_code == 0, result.output
