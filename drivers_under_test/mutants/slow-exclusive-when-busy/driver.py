"""Mutant driver slow-exclusive-when-busy: spends 40 ms per EXCLUSIVE grant while 2+ exclusive grants are live."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import time  # noqa: E402

from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402

BUSY = 2
PASS_S = 0.04


class Mutant(ReferencePolicy):
    """Defect (S1.8): packing exclusive grants re-plans all of them: filling a node is slow, although the
    median admission (mostly shared or on a quiet node) still looks fine."""

    def make_grants(self, claim, chosen):
        if any(g.exclusive for g in claim.groups) and sum(a.exclusive for a in self.admissions.values()) >= BUSY:
            time.sleep(PASS_S)
        return super().make_grants(claim, chosen)


if __name__ == "__main__":
    main(Mutant)
