"""Mutant driver slow-with-allocations: time per admission grows with its live admissions."""

from __future__ import annotations

import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (latency): every admission costs 0.3 ms per live admission (the rescan is the defect)."""

    def admit(self, call):
        time.sleep(0.0003 * len(self.admissions))
        return super().admit(call)


if __name__ == "__main__":
    main(Mutant)
