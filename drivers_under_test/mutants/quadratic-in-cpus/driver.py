"""Mutant driver quadratic-in-cpus: admission time grows with the square of the CPU count."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import time  # noqa: E402

from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402

PAIR_S = 4e-5  # cost of one pairwise comparison


class Mutant(ReferencePolicy):
    """Defect (KEP-3675 l.379-382, scalability): an O(n^2) scan over the machine's CPUs per admission: 2.6 ms
    on 8 CPUs, 41 ms on 32 (its self-test uses latency-profile.yaml, where only the growth budget binds)."""

    def choose_cpus(self, claim, usable):
        time.sleep(PAIR_S * len(self.topology.online_cpus) ** 2)
        return super().choose_cpus(claim, usable)


if __name__ == "__main__":
    main(Mutant)
