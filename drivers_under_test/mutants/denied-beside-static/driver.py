"""Mutant driver denied-beside-static: puts DENIED threads beside a static pod's thread, withholding its CPU."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from dataclasses import replace  # noqa: E402

from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S2.4, S3.2): to save whole cores, a DENIED group first takes free threads whose sibling is
    held by someone else (a CPU once offered, now missing from availableCpus): it withholds a CPU that a
    static-QoS pod already holds, so the same CPU would be counted twice."""

    seen = frozenset()
    offered = frozenset()

    def usable_cpus(self, call):
        self.seen = self.seen | call.available
        self.offered = call.available
        return super().usable_cpus(call)

    def choose_group(self, group, free):
        if not group.exclusive or group.siblings != "denied" or group.is_range:
            return super().choose_group(group, free)
        foreign = self.seen - self.offered - self._withheld  # held by others, not reserved, not ours
        picks = []
        for core in self.topology.cores:
            if len(picks) == group.count:
                break
            if core & foreign and core & free:
                picks.append(min(core & free))
        if not picks:
            return super().choose_group(group, free)
        rest = group.count - len(picks)
        taken = frozenset(picks)
        if rest:
            blocked = frozenset().union(*(self.topology.core_of[c] for c in picks))
            taken |= super().choose_group(replace(group, min_count=rest, max_count=rest), free - blocked)
        return taken


if __name__ == "__main__":
    main(Mutant)
