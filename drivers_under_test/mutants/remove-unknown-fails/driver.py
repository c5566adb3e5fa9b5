"""Mutant driver remove-unknown-fails: refuses a CCIRemoveContainerResource for a container id it does not hold."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import PolicyError, main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S1.7): a repeated Remove, or one for an unknown container id, gets an err (not idempotent)."""

    def remove(self, namespace, claim_uid, claim_name, container_id):
        if container_id and self.find_by_container_id(container_id) is None:
            raise PolicyError(f"no admission holds container id {container_id}")
        return super().remove(namespace, claim_uid, claim_name, container_id)


if __name__ == "__main__":
    main(Mutant)
