"""Mutant driver leaks-unadded: a Remove with an empty container_id leaks never-added admissions."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S1.7): a Remove with an empty container_id (a rolled-back admission) releases nothing."""

    def remove(self, namespace, claim_uid, claim_name, container_id):
        if container_id:
            super().remove(namespace, claim_uid, claim_name, container_id)


if __name__ == "__main__":
    main(Mutant)
