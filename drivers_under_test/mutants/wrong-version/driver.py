"""Mutant driver wrong-version: registers with supported_versions [v1beta1] only."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


from cci_conformance.driver_sdk import main  # noqa: E402
from cci_conformance.driver_sdk import server as sdk_server  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    pass


if __name__ == "__main__":
    sdk_server.SUPPORTED_VERSIONS = ("v1beta1",)  # defect (S1.2): the node only speaks v1alpha1
    main(Mutant)
