"""A host-wide lock, so that no two processes of a run (pytest-xdist workers) measure latency at the same time."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ..hostlock import held

LOCK_FILE = Path(tempfile.gettempdir()) / "cci-conformance-latency.lock"
# Another process's measurements (a fill and LAT-004's base and probe machines) take minutes on kind.
WAIT_S = 3600.0


@contextlib.contextmanager
def measuring_alone(lock_file: Path = LOCK_FILE, wait_s: float = WAIT_S) -> Iterator[None]:
    """Hold the host's latency lock for the block. Two fills at once on a 2-core host measured each other: on kind
    with `run -n 2` one 8-CPU machine's fill of 6 admissions averaged 26 ms a CCIAdmit at load average 44, its
    other runs 3 ms, and failed LAT-003 for a driver that meets it (docs/kind.md)."""
    with held(lock_file, wait_s, "another process is measuring"):
        yield
