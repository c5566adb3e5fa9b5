"""Minimal CCI driver: serves only the base every driver must serve (docs/spec.md S1.11) and refuses the rest."""

from __future__ import annotations

import os
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from cci_conformance.driver_sdk import PolicyError, main  # noqa: E402
from cci_conformance.protocol.capabilities import capabilities_used  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402

# Capabilities beyond the base this driver honours, comma-separated (none by default). The self-test
# certifies it once per capability with a manifest declaring just that one (tests/selftest/test_minimal_certifies.py).
CAPABILITIES_ENV = "MINIMAL_DRIVER_CAPABILITIES"


class MinimalPolicy(ReferencePolicy):
    """The reference placement, limited to base claims (plus what CAPABILITIES_ENV names): what a driver declaring
    no capability may be sent."""

    capabilities = tuple(c for c in os.environ.get(CAPABILITIES_ENV, "").split(",") if c)

    def validate_request(self, call):
        # The strictest refusal S1.11 allows, and the first check: any claim that uses an undeclared capability
        # (malformed ones too: a second core group, a CORE-SIBLING-*, NUMA or device attribute) is refused for
        # that alone, before its parameters are read against the machine, so a suite that sends one fails here.
        missing = [c for c in capabilities_used(call.resource_handle) if c not in self.capabilities]
        if missing:  # S1.6: a refusal says what is wrong and what would fix it
            raise PolicyError(f"claim parameters need the {', '.join(missing)} capability, which this driver does "
                              f"not declare; fix: send one core group with an exact count and only EXCLUSIVE or "
                              f"SHARED (docs/spec.md S1.11), or use a driver that declares {missing[0]}")
        return super().validate_request(call)


if __name__ == "__main__":
    main(MinimalPolicy)
