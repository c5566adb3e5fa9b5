"""Mutant driver shared-flagged-exclusive: SHARED groups of a mixed claim flagged exclusive."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import (
    Grant,  # noqa: E402
    main,  # noqa: E402
)
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S2.2): one exclusive group makes every group of the claim exclusive=true."""

    def make_grants(self, claim, chosen):
        grants = super().make_grants(claim, chosen)
        if claim.exclusive:
            grants = tuple(Grant(g.cpus, True, g.withheld) for g in grants)
        return grants


if __name__ == "__main__":
    main(Mutant)
