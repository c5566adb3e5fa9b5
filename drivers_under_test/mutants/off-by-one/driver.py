"""Mutant driver off-by-one: grants one CPU too many for plain SHARED groups of five or more CPUs when it can."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S2.3): a plain SHARED group of 5+ CPUs gets count+1 CPUs whenever one more is free."""

    def choose_group(self, group, free):
        plain = (not group.exclusive and not group.is_range and group.mem == "none"
                 and group.device_affinity == "none" and group.siblings == "preferred")
        if plain and group.count >= 5 and len(free) > group.count:
            return super().choose_group(replace(group, min_count=group.count + 1, max_count=group.count + 1), free)
        return super().choose_group(group, free)


if __name__ == "__main__":
    main(Mutant)
