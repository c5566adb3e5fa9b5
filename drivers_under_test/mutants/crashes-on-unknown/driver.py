"""Mutant driver crashes-on-unknown: exits on unknown keys or attributes in the claim parameters."""

from __future__ import annotations

import os
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import main  # noqa: E402
from cci_conformance.protocol.claims import ClaimError  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S2.1): a lookup of an unknown name kills the process instead of refusing the claim."""

    def validate_request(self, call):
        try:
            return super().validate_request(call)
        except ClaimError as exc:
            if "unknown" in str(exc) or "not a JSON object" in str(exc) or "not valid JSON" in str(exc):
                os._exit(3)
            raise


if __name__ == "__main__":
    main(Mutant)
