"""Mutant driver double-grant-after-restart: reloads its admissions after a restart but not the CPUs they withhold."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S1.4, S1.9): after a restart the withheld set is empty until the next removal rebuilds it."""

    def restore(self, data):
        super().restore(data)
        self._withheld = frozenset()


if __name__ == "__main__":
    main(Mutant)
