"""Mutant driver numa-contiguous: reads a NUMA node's cpulist as one contiguous range when placing NUMA-bound groups."""

from __future__ import annotations

import sys
from functools import cached_property
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.placement import Placer  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class ContiguousPlacer(Placer):
    """Assigns a core to the first node whose lowest..highest CPU range holds it (wrong for 0-7,16-23)."""

    @cached_property
    def node_cores(self):
        spans = {n: range(min(c), max(c) + 1) for n, c in sorted(self.topology.node_cpus.items()) if c}
        out = {n: [] for n in spans}
        for core in self.topology.cores:
            node = next(n for n, span in spans.items() if min(core) in span)
            out[node].append(tuple(sorted(core)))
        return {n: tuple(cores) for n, cores in out.items()}


class Mutant(ReferencePolicy):
    """Defect (S2.5): NUMA-MEM-AFFINITY-BIND-* groups are placed with the contiguous-range view of the nodes."""

    def choose_group(self, group, free):
        if not group.mem.startswith("bind"):
            return super().choose_group(group, free)
        normal, self.placer = self.placer, ContiguousPlacer(self.topology)
        try:
            return super().choose_group(group, free)
        finally:
            self.placer = normal


if __name__ == "__main__":
    main(Mutant)
