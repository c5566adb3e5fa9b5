"""The recorder log of the dra-cpu scenarios: moved to cci_conformance/dra/recorder.py (the DRA package)."""

from ..dra.recorder import (
           EVERY_CPU,
           Grant,
           Record,
           Replay,
           Violation,
           creates_of,
           gone_from_checkpoints,
           last_cpus,
           parse,
)

__all__ = ["EVERY_CPU", "Grant", "Record", "Replay", "Violation", "creates_of", "gone_from_checkpoints", "last_cpus",
           "parse"]
