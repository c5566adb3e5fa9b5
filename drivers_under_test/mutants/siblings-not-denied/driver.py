"""Mutant driver siblings-not-denied: ignores CORE-SIBLING-DENIED and packs whole cores, handing out both siblings."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S2.4): CORE-SIBLING-DENIED is placed like CORE-SIBLING-PREFERRED (siblings handed out together)."""

    def choose_group(self, group, free):
        if group.siblings == "denied":
            group = replace(group, siblings="preferred")
        return super().choose_group(group, free)

    def withheld_for(self, group, cpus):
        return cpus if group.exclusive else frozenset()


if __name__ == "__main__":
    main(Mutant)
