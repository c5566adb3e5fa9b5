"""Mutant driver add-accepts-unknown: accepts CCIAddContainerResource for a container it never admitted."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S1.7): an Add for an unknown (pod, container) is answered with an empty err."""

    def add(self, pod, container, container_id, cgroup):
        if (pod, container) not in self.admissions:
            return None
        return super().add(pod, container, container_id, cgroup)


if __name__ == "__main__":
    main(Mutant)
