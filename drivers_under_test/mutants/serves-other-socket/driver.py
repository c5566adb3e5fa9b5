"""Mutant driver serves-other-socket: serves CCI on <plugin-dir>/driver.sock and advertises that endpoint."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from cci_conformance.driver_sdk import main  # noqa: E402
from cci_conformance.driver_sdk import runner as sdk_runner  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    pass


if __name__ == "__main__":
    # Defect (S1.2): the endpoint must be <kubelet-root>/plugins/<name>/cci.sock. This one is still under the
    # plugins folder, so the node accepts it and every call works: only a check of what was advertised sees it.
    sdk_runner.CCI_SOCKET = "driver.sock"
    main(Mutant)
