"""Mutant driver stale-free-list: a removed EXCLUSIVE grant's CPUs miss the next same-sized EXCLUSIVE claim."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S1.6, S1.7): a Remove updates the free list lazily, so the admission right after it cannot use
    the freed CPUs; it shows when a same-sized exclusive claim replaces the removed one and needs them."""

    freed: tuple = (frozenset(), False)
    freed_now: tuple = (frozenset(), False)

    def release(self, admission):
        super().release(admission)
        self.freed = (admission.cpuset | admission.withheld, admission.exclusive)

    def admit(self, call):
        self.freed_now, self.freed = self.freed, (frozenset(), False)  # only the very next CCIAdmit is affected
        return super().admit(call)

    def choose_cpus(self, claim, usable):
        cpus, was_exclusive = self.freed_now
        is_exclusive = all(g.exclusive for g in claim.groups)
        if cpus and was_exclusive and is_exclusive and sum(g.count for g in claim.groups) == len(cpus):
            usable = usable - cpus
        return super().choose_cpus(claim, usable)


if __name__ == "__main__":
    main(Mutant)
