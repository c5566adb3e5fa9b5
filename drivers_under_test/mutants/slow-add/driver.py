"""Mutant driver slow-add: every CCIAddContainerResource takes 30 ms; CCIAdmit stays fast."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import threading  # noqa: E402

from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402

# Three times the p50 budget (10 ms) and over the 20 ms a container may take at the 50/s throughput floor,
# but under the p99 budget (100 ms) and far under the deadline: the median and the fill rate fail, nothing else.
STALL_S = 0.030


class Mutant(ReferencePolicy):
    """Defect (S1.8): Add does slow work (e.g. a cgroup walk) on every container start. A node that times
    CCIAdmit alone sees a fast driver; the pod start waits for both calls."""

    def add(self, pod, container, container_id, cgroup):
        threading.Event().wait(STALL_S)
        return super().add(pod, container, container_id, cgroup)


if __name__ == "__main__":
    main(Mutant)
