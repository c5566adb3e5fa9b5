"""Mutant driver stale-availability: keeps using CPUs once offered after a static pod took them."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S1.4): treats availableCpus as "CPUs that exist": CPUs static pods took later are reused."""

    seen = frozenset()

    def usable_cpus(self, call):
        self.seen = self.seen | call.available
        return (self.seen & self.topology.online_cpus) - self._withheld


if __name__ == "__main__":
    main(Mutant)
