"""Mutant driver denied-siblings-kept: never gives back the siblings of a removed large CORE-SIBLING-DENIED group."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402

LARGE = 8  # DENIED groups of this many CPUs or more (smaller ones, which other tests remove, are released)


class Mutant(ReferencePolicy):
    """Defect (S1.7): after Remove, the withheld siblings of a DENIED group of 8+ CPUs stay withheld in the
    driver's own books; the node frees them, but the driver never grants them again."""

    kept: frozenset = frozenset()

    def release(self, admission):
        siblings = frozenset().union(*(g.withheld - g.cpus for g in admission.groups if len(g.cpus) >= LARGE))
        super().release(admission)
        self.kept = self.kept | siblings

    def usable_cpus(self, call):
        return super().usable_cpus(call) - self.kept


if __name__ == "__main__":
    main(Mutant)
