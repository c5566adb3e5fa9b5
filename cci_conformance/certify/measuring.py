"""A host-wide lock, so that no two processes of a run (pytest-xdist workers) measure latency at the same time."""

from __future__ import annotations

import contextlib
import fcntl
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ..waiting import wait_for

LOCK_FILE = Path(tempfile.gettempdir()) / "cci-conformance-latency.lock"
# Another process's measurements (a fill and LAT-004's base and probe machines) take minutes on kind.
WAIT_S = 3600.0


@contextlib.contextmanager
def measuring_alone(lock_file: Path = LOCK_FILE, wait_s: float = WAIT_S) -> Iterator[None]:
    """Hold the host's latency lock for the block. Two fills at once on a 2-core host measured each other: on kind
    with `run -n 2` one 8-CPU machine's fill of 6 admissions averaged 26 ms a CCIAdmit at load average 44, its
    other runs 3 ms, and failed LAT-003 for a driver that meets it (docs/kind.md)."""
    with open(lock_file, "a") as handle:
        def taken() -> bool:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True
        wait_for(taken, wait_s, interval=0.5, what=f"the latency lock {lock_file} (another process is measuring)")
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
