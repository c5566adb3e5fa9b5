"""Mutant driver default-siblings-scattered: spreads a default-sibling EXCLUSIVE group of 2t+1 CPUs over cores."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import json  # noqa: E402
from dataclasses import replace  # noqa: E402

from cci_conformance.driver_sdk import PolicyError, main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S2.4): an absent CORE-SIBLING attribute is not read as PREFERRED: an odd group of 2t+1 CPUs
    is spread over cores instead of packed into whole ones."""

    raw_cpu_attributes: list = []

    def validate_request(self, call):
        claim = super().validate_request(call)
        self.raw_cpu_attributes = json.loads(call.resource_handle).get("cpu attributes", [])
        return claim

    def choose_group(self, group, free):
        attrs = self.raw_cpu_attributes[group.index] if group.index < len(self.raw_cpu_attributes) else []
        default = not any(a.startswith("CORE-SIBLING-") for a in attrs)
        if default and group.exclusive and not group.is_range and group.count == 2 * self.topology.threads_per_core + 1:
            try:
                return super().choose_group(replace(group, siblings="denied"), free)
            except PolicyError:  # no one-thread-per-core room: place it the normal way
                pass
        return super().choose_group(group, free)


if __name__ == "__main__":
    main(Mutant)
