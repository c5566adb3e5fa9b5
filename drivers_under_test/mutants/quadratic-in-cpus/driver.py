"""Mutant driver quadratic-in-cpus: admission time grows with the square of the CPU count."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import time  # noqa: E402

from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402

PAIR_S = 1.25e-4  # cost of one pairwise comparison


class Mutant(ReferencePolicy):
    """Defect (KEP-3675 l.379-382, scalability): an O(n^2) scan over the machine's CPUs per admission: 8 ms
    on 8 CPUs, 128 ms on 32 (its self-test uses latency-profile.yaml, where only the growth budget binds).

    The scan must dwarf the rest of an admission: LAT-004 judges a ratio of medians, and every admission also
    pays the driver's gRPC round trips (4 ms on an idle slow host, 10.5 ms on a loaded CI host). The growth is
    (o + 128) / (o + 8), over the 4x budget while that overhead o stays under 32 ms; at 2.6 ms / 41 ms it was
    3.9x on that CI host, a missed mutant."""

    def choose_cpus(self, claim, usable):
        time.sleep(PAIR_S * len(self.topology.online_cpus) ** 2)
        return super().choose_cpus(claim, usable)


if __name__ == "__main__":
    main(Mutant)
