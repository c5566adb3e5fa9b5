"""Mutant driver slow-with-allocations: time per admission grows with its live admissions."""

from __future__ import annotations

import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402

RESCAN_S = 0.001  # cost of rescanning one live admission


class Mutant(ReferencePolicy):
    """Defect (latency): every admission costs 1 ms per live admission (the rescan is the defect).

    LAT-005 judges the filled node's median over the empty node's, and both pay the driver's gRPC round trips
    (4 ms on an idle slow host, 10 ms and more on a loaded CI host); with about 50 live admissions at the
    filled node's median the ratio is (o + 50) / o, over the 3x budget while that overhead o stays under 25 ms.
    At 0.3 ms per admission it was 4.5x-5x idle and under 3x past 7 ms of overhead. Near 90 live admissions
    the tail nears 100 ms: its self-test uses latency-profile.yaml, where p99 and throughput do not bind."""

    def admit(self, call):
        time.sleep(RESCAN_S * len(self.admissions))
        return super().admit(call)


if __name__ == "__main__":
    main(Mutant)
