"""Mutant driver keeps-removed-in-state: its state file never forgets a removed admission."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S1.9): a removal frees the CPUs in memory but is never written to the state file, so a restarted
    driver reloads every admission removed before it and holds its CPUs again."""

    def entry_changes(self, token):
        put, _deleted = super().entry_changes(token)
        return put, []


if __name__ == "__main__":
    main(Mutant)
