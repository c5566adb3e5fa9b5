"""Mutant driver vague-errors: refuses malformed claims with an err that names nothing to fix."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from cci_conformance.driver_sdk import main  # noqa: E402
from cci_conformance.protocol.claims import ClaimError  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S1.6): every malformed claim is refused, but with "invalid request": no key, attribute or index."""

    def validate_request(self, call):
        try:
            return super().validate_request(call)
        except ClaimError:
            raise ClaimError("invalid request") from None


if __name__ == "__main__":
    main(Mutant)
