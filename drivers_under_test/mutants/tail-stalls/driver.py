"""Mutant driver tail-stalls: stalls 150 ms on every 20th admission once 20+ admissions are live."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import time  # noqa: E402

from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402

BUSY = 20
EVERY = 20
STALL_S = 0.15


class Mutant(ReferencePolicy):
    """Defect (S1.8): a periodic compaction runs inside CCIAdmit: a rare but long stall, a p99 beyond budget."""

    admits = 0

    def admit(self, call):
        if (call.pod, call.container) not in self.admissions and len(self.admissions) >= BUSY:
            self.admits += 1
            if self.admits % EVERY == 0:
                time.sleep(STALL_S)
        return super().admit(call)


if __name__ == "__main__":
    main(Mutant)
