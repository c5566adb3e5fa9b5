"""Mutant driver interleave-ignored: places INTERLEAVE-PREFERRED groups on one node when one fits."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S2.6): the interleave preference is dropped, so a group that could span every node does not."""

    def plans(self, group):
        return [p for p in super().plans(group) if not (group.mem == "interleave-preferred" and p[0] == "spread")]


if __name__ == "__main__":
    main(Mutant)
