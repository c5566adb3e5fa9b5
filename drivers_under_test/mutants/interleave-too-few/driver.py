"""Mutant driver interleave-too-few: grants an INTERLEAVE-REQUIRED group smaller than the node count."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S2.6): fewer CPUs than NUMA nodes cannot interleave, but the group is placed anywhere instead."""

    def plans(self, group):
        nodes = list(self.placer.cpu_nodes)
        if group.mem == "interleave-required" and group.max_count < len(nodes):
            return [("any", nodes)]
        return super().plans(group)


if __name__ == "__main__":
    main(Mutant)
