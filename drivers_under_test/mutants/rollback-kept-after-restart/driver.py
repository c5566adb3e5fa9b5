"""Mutant driver rollback-kept-after-restart: acknowledges the rollback of an admission it reloaded, keeps its CPUs."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S1.7, S3.5): a Remove with an empty container_id succeeds but releases nothing when the claim's
    un-added admissions were reloaded from the state file (made before this process started), so a grant whose
    answer a dead node never got stays held; a re-admission of it is answered idempotently with those CPUs."""

    reloaded: frozenset = frozenset()

    def restore(self, data):
        super().restore(data)
        self.reloaded = frozenset(self.admissions)

    def remove(self, namespace, claim_uid, claim_name, container_id):
        if not container_id:
            unadded = [a for a in self.admissions.values() if a.claim_uid == claim_uid and not a.container_id]
            if unadded and all(a.key in self.reloaded for a in unadded):
                return  # acknowledged, kept
        super().remove(namespace, claim_uid, claim_name, container_id)


if __name__ == "__main__":
    main(Mutant)
