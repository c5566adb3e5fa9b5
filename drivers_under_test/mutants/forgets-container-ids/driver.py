"""Mutant driver forgets-container-ids: reloads grants of 4+ CPUs without their container ids after a restart."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from dataclasses import replace  # noqa: E402

from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402

WIDE = 4


class Mutant(ReferencePolicy):
    """Defect (S1.9, S1.7): the checkpoint of a grant of WIDE or more CPUs is read back without its container
    id (a record-layout bug), so the node's Remove by container id matches nothing and the CPUs stay taken."""

    def restore(self, data):
        super().restore(data)
        self.admissions = {k: replace(a, container_id="", cgroup="") if len(a.cpuset) >= WIDE else a
                           for k, a in self.admissions.items()}


if __name__ == "__main__":
    main(Mutant)
