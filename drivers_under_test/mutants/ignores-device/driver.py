"""Mutant driver ignores-device: ignores NUMA-DEVICE-AFFINITY and places the group as if no device were named."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S2.7): the device's NUMA node plays no part in placement."""

    def plans(self, group):
        return super().plans(replace(group, device=None, device_affinity="none"))


if __name__ == "__main__":
    main(Mutant)
