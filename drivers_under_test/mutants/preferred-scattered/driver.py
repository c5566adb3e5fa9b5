"""Mutant driver preferred-scattered: places explicit CORE-SIBLING-PREFERRED groups one thread per core."""

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
    """Defect (S2.4): an explicit CORE-SIBLING-PREFERRED is read as "spread over cores" (no packing)."""

    raw_cpu_attributes: list = []

    def validate_request(self, call):
        claim = super().validate_request(call)
        self.raw_cpu_attributes = json.loads(call.resource_handle).get("cpu attributes", [])
        return claim

    def choose_group(self, group, free):
        attrs = self.raw_cpu_attributes[group.index] if group.index < len(self.raw_cpu_attributes) else []
        if "CORE-SIBLING-PREFERRED" in attrs:
            try:
                return super().choose_group(replace(group, siblings="denied"), free)
            except PolicyError:  # no one-thread-per-core room: place it the normal way
                pass
        return super().choose_group(group, free)


if __name__ == "__main__":
    main(Mutant)
