"""Mutant driver lenient-sibling-required: relaxes a CORE-SIBLING-REQUIRED count of partial cores to PREFERRED."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from dataclasses import replace  # noqa: E402

from cci_conformance.driver_sdk import main  # noqa: E402
from cci_conformance.protocol.claims import ClaimError  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S2.4): a count of partial cores with CORE-SIBLING-REQUIRED is relaxed to PREFERRED, not refused."""

    def validate_request(self, call):
        try:
            return super().validate_request(call)
        except ClaimError as exc:
            if "CORE-SIBLING-REQUIRED needs whole cores" not in str(exc):
                raise
            relaxed = call.resource_handle.replace("CORE-SIBLING-REQUIRED", "CORE-SIBLING-PREFERRED")
            return super().validate_request(replace(call, resource_handle=relaxed))


if __name__ == "__main__":
    main(Mutant)
