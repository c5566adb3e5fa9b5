"""Mutant driver dead-after-restart: refuses every new claim after a restart that found admissions in its checkpoint."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import PolicyError, main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S1.9, S3.8): a driver restarted over live admissions answers retries of those but refuses
    every new claim (it waits for a resync the node never sends)."""

    recovering = False

    def restore(self, data):
        super().restore(data)
        self.recovering = bool(self.admissions)

    def validate_request(self, call):
        if self.recovering:
            raise PolicyError("recovering from a restart: not accepting new claims yet")
        return super().validate_request(call)

    def release(self, admission):
        super().release(admission)
        if not self.admissions:  # nothing left to resync: it serves again
            self.recovering = False


if __name__ == "__main__":
    main(Mutant)
