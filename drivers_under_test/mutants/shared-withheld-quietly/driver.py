"""Mutant driver shared-withheld-quietly: reports a lone 4-CPU SHARED group shared but withholds its CPUs."""

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
    """Defect (S2.9): a lone 4-CPU SHARED group on an otherwise idle driver is reported shared (exclusive=false)
    but booked as withheld, so the driver itself never grants those CPUs to a later admission."""

    plain = False

    def validate_request(self, call):
        claim = super().validate_request(call)
        self.plain = json.loads(call.resource_handle).get("cpu attributes", []) == [["SHARED"]]
        return claim

    def make_grants(self, claim, chosen):
        grants = super().make_grants(claim, chosen)
        if self.plain and not self.admissions and len(grants) == 1 and len(grants[0].cpus) == SIZE:
            return (Grant(grants[0].cpus, False, grants[0].cpus),)
        return grants


if __name__ == "__main__":
    main(Mutant)
