"""Mutant driver second-exclusive-unflagged: reports a second live 4-CPU EXCLUSIVE grant as shared."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import json  # noqa: E402

from cci_conformance.driver_sdk import Grant, main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402

SIZE = 4


class Mutant(ReferencePolicy):
    """Defect (S2.9): the exclusivity of a 4-CPU EXCLUSIVE group is looked up by size, and a size already
    held exclusively is booked as shared: the node lends those CPUs to the shared pool and other containers."""

    plain = False

    def validate_request(self, call):
        claim = super().validate_request(call)
        attrs = json.loads(call.resource_handle).get("cpu attributes", [])
        self.plain = attrs == [["EXCLUSIVE"]]
        return claim

    def make_grants(self, claim, chosen):
        grants = super().make_grants(claim, chosen)
        held = any(g.exclusive and len(g.cpus) == SIZE for a in self.admissions.values() for g in a.groups)
        if self.plain and len(grants) == 1 and len(grants[0].cpus) == SIZE and held:
            return (Grant(grants[0].cpus, False),)
        return grants


if __name__ == "__main__":
    main(Mutant)
