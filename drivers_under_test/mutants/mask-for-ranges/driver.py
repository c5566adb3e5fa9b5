"""Mutant driver mask-for-ranges: replies to a `cores` range with a hexadecimal cpumask instead of a cpulist."""

from __future__ import annotations

import json
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.cpuset import format_cpumask  # noqa: E402
from cci_conformance.driver_sdk import main  # noqa: E402
from cci_conformance.driver_sdk import server as sdk_server  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402

ORIGINAL_REPLY = sdk_server.admit_response


def admit_response(admission):
    """Defect (S1.4, S2.8): the reply to a range claim carries a cpumask ("f0") where a cpulist belongs."""
    reply = ORIGINAL_REPLY(admission)
    cores = json.loads(admission.resource_handle).get("cores", [])
    if any("-" in str(c) for c in cores):
        reply.rSet.cpuset = format_cpumask(admission.cpuset, max(admission.cpuset) + 1)
    return reply


class Mutant(ReferencePolicy):
    pass


if __name__ == "__main__":
    sdk_server.admit_response = admit_response
    main(Mutant)
