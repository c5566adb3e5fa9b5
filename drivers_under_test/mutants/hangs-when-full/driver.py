"""Mutant driver hangs-when-full: deadlocks once it holds 96 live admissions (a fixed-size table)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402

LIMIT = 96


class Mutant(ReferencePolicy):
    """Defect (S1.8): the 97th live admission waits forever, holding the server's lock."""

    def admit(self, call):
        if len(self.admissions) >= LIMIT and (call.pod, call.container) not in self.admissions:
            threading.Event().wait()
        return super().admit(call)


if __name__ == "__main__":
    main(Mutant)
