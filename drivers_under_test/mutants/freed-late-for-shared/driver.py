"""Mutant driver freed-late-for-shared: a removed whole-machine grant's CPUs miss the next same-sized SHARED claim."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S1.7): after a grant of every CPU the driver was ever offered is removed, its CPUs go back to
    the exclusive free list only, so a SHARED claim right after it cannot use them."""

    seen = frozenset()
    freed: frozenset = frozenset()
    freed_now: frozenset = frozenset()

    def release(self, admission):
        super().release(admission)
        whole_machine = admission.exclusive and admission.cpuset == self.seen
        self.freed = admission.cpuset if whole_machine else frozenset()

    def admit(self, call):
        self.freed_now, self.freed = self.freed, frozenset()  # only the very next CCIAdmit is affected
        self.seen = self.seen | call.available
        return super().admit(call)

    def choose_cpus(self, claim, usable):
        shared = not any(g.exclusive for g in claim.groups)
        if self.freed_now and shared and sum(g.count for g in claim.groups) == len(self.freed_now):
            usable = usable - self.freed_now
        return super().choose_cpus(claim, usable)


if __name__ == "__main__":
    main(Mutant)
