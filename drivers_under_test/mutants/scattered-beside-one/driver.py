"""Mutant driver scattered-beside-one: splits a 2-CPU EXCLUSIVE group while its only live admission has 1 CPU."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from dataclasses import replace  # noqa: E402

from cci_conformance.driver_sdk import PolicyError, main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S2.4): with exactly one live admission, of one CPU, a 2-CPU EXCLUSIVE group without a sibling
    or NUMA attribute gets one thread of each of two cores although whole cores are free. Only the second
    grant of a sequence that starts with a 1-CPU grant meets this state."""

    def choose_group(self, group, free):
        live = list(self.admissions.values())
        if (len(live) == 1 and sum(len(g.cpus) for g in live[0].groups) == 1 and group.exclusive
                and group.min_count == group.max_count == 2 and group.siblings == "preferred"
                and group.mem == "none" and group.device_affinity == "none"):
            try:
                return super().choose_group(replace(group, siblings="denied"), free)
            except PolicyError:  # no two whole cores: place it the normal way
                pass
        return super().choose_group(group, free)


if __name__ == "__main__":
    main(Mutant)
