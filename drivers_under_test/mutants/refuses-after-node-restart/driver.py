"""Mutant driver refuses-after-node-restart: refuses the first claim after a restarted node registers it again."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import PolicyError, main  # noqa: E402
from cci_conformance.driver_sdk import server as sdk_server  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402

REGISTRATIONS = [0]  # registrations this process has seen: a second one means the kubelet restarted


class Mutant(ReferencePolicy):
    """Defect (S3.6, S3.8): after the node's restart the driver refuses one claim, expecting the node to
    replay its state first, so the restarted node cannot use its free CPUs."""

    resynced_at = 1

    def validate_request(self, call):
        if REGISTRATIONS[0] > self.resynced_at:
            self.resynced_at = REGISTRATIONS[0]
            raise PolicyError("the node re-registered: waiting for its state before admitting")
        return super().validate_request(call)


class CountingRegistration(sdk_server.RegistrationServicer):
    def NotifyRegistrationStatus(self, request, context):  # noqa: N802 - gRPC method name
        if request.plugin_registered:
            REGISTRATIONS[0] += 1
        return super().NotifyRegistrationStatus(request, context)


if __name__ == "__main__":
    from cci_conformance.driver_sdk import runner as sdk_runner

    sdk_runner.RegistrationServicer = CountingRegistration
    main(Mutant)
