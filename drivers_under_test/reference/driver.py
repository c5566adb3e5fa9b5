"""Entry point of the reference CCI driver: the SDK runner over ReferencePolicy."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cci_conformance.driver_sdk import main  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402

if __name__ == "__main__":
    main(ReferencePolicy)
