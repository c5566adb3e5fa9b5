"""Minimal CCI driver: serves only the base every driver must serve (docs/spec.md S1.11) and refuses the rest."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from cci_conformance.driver_sdk import PolicyError, main  # noqa: E402
from cci_conformance.protocol.capabilities import needed_capabilities  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class MinimalPolicy(ReferencePolicy):
    """The reference placement, limited to base claims: what a driver declaring no capability may be sent."""

    capabilities = ()  # parse_claim then refuses a `cores` range with an err naming `core-ranges` (S2.8)

    def validate_request(self, call):
        claim = super().validate_request(call)
        missing = needed_capabilities(claim)
        if missing:  # S1.6: a refusal says what is wrong and what would fix it
            raise PolicyError(f"claim parameters need the {', '.join(missing)} capability, which this driver does "
                              f"not declare; fix: send one core group with an exact count and only EXCLUSIVE or "
                              f"SHARED (docs/spec.md S1.11), or use a driver that declares {missing[0]}")
        return claim


if __name__ == "__main__":
    main(MinimalPolicy)
