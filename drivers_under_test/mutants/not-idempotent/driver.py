"""Mutant driver not-idempotent: refuses a repeated CCIAdmit for a container it already admitted."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S1.5): a retried CCIAdmit is refused as a conflict instead of answered again."""

    def same_admission(self, existing, call):
        return False


if __name__ == "__main__":
    main(Mutant)
