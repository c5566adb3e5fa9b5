"""Mutant driver forgets-state: starts empty after a restart, ignoring its own checkpoint."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S1.9): the saved admissions are not read back at start."""

    def restore(self, data):
        return None


if __name__ == "__main__":
    main(Mutant)
