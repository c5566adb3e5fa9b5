"""Mutant driver slow-remove-when-busy: CCIRemoveContainerResource takes 6 s once 50 admissions are live."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import threading  # noqa: E402

from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402

BUSY = 50  # live admissions from which Remove stalls (only the deadline test holds this many)
STALL_S = 6.0  # longer than the node's default 5 s rpcTimeoutSeconds


class Mutant(ReferencePolicy):
    """Defect (S1.8): Remove rescans something that grows with the live admissions and misses the deadline;
    admissions and Adds stay fast, so only a test that times Remove sees it."""

    def remove(self, namespace, claim_uid, claim_name, container_id):
        if len(self.admissions) >= BUSY:
            threading.Event().wait(STALL_S)
        return super().remove(namespace, claim_uid, claim_name, container_id)


if __name__ == "__main__":
    main(Mutant)
