"""Mutant driver shared-repeat-moved: a repeated CCIAdmit of a SHARED claim is placed anew, elsewhere."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    """Defect (S1.5): a retried admission of a claim without exclusive groups is answered with a new placement
    that avoids the first one's CPUs (exclusive retries stay idempotent)."""

    def admit(self, call):
        existing = self.admissions.get((call.pod, call.container))
        if existing is None or existing.exclusive or not self.same_admission(existing, call):
            return super().admit(call)
        claim = self.validate_request(call)
        chosen = self.choose_cpus(claim, self.usable_cpus(call) - existing.cpuset)
        moved = replace(existing, groups=self.make_grants(claim, chosen))
        self.record(moved)
        return moved


if __name__ == "__main__":
    main(Mutant)
