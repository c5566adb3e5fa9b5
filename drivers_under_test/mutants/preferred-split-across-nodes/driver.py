"""Mutant driver preferred-split-across-nodes: spreads explicit CORE-SIBLING-PREFERRED groups over two nodes."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import json  # noqa: E402

from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.placement import NoFit  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S2.4): an explicit CORE-SIBLING-PREFERRED group with no NUMA or device attribute gets single
    threads of cores, half on the first NUMA node and half on the second, although whole cores are free.
    Each node's part alone may look like a spread; only packing judged across nodes sees the split cores."""

    raw_cpu_attributes: list = []

    def validate_request(self, call):
        claim = super().validate_request(call)
        self.raw_cpu_attributes = json.loads(call.resource_handle).get("cpu attributes", [])
        return claim

    def choose_group(self, group, free):
        attrs = self.raw_cpu_attributes[group.index] if group.index < len(self.raw_cpu_attributes) else []
        nodes = self.placer.cpu_nodes
        if ("CORE-SIBLING-PREFERRED" in attrs and group.mem == "none" and group.device_affinity == "none"
                and len(nodes) > 1 and not group.is_range):
            first = (group.count + 1) // 2
            try:
                return (self.placer.take_on_node(nodes[0], free, first, "denied")
                        | self.placer.take_on_node(nodes[1], free, group.count - first, "denied"))
            except NoFit:  # not enough single threads: place it the normal way
                pass
        return super().choose_group(group, free)


if __name__ == "__main__":
    main(Mutant)
