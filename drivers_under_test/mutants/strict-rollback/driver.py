"""Mutant driver strict-rollback: refuses an empty-id Remove for a claim it holds nothing un-added for."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import PolicyError, main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S1.7): a Remove with an empty container_id for a claim with no un-added admission gets an err."""

    def remove(self, namespace, claim_uid, claim_name, container_id):
        if not container_id and not any(a.claim_uid == claim_uid and not a.container_id
                                        for a in self.admissions.values()):
            raise PolicyError(f"claim {claim_uid} has no admission to roll back")
        return super().remove(namespace, claim_uid, claim_name, container_id)


if __name__ == "__main__":
    main(Mutant)
