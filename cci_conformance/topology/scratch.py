"""Short-lived directories for rendered trees, on a memory filesystem when the machine has one."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# A rendered tree is tens of thousands of tiny files; on a busy disk creating them can take seconds,
# on tmpfs milliseconds. Nothing here ever holds a unix socket, so the path length does not matter.
MEMORY_FS = "/dev/shm"


def scratch_parent() -> str:
    if os.path.isdir(MEMORY_FS) and os.access(MEMORY_FS, os.W_OK | os.X_OK):
        return MEMORY_FS
    return tempfile.gettempdir()


@contextmanager
def scratch_dir(prefix: str = "cci-topo-") -> Iterator[Path]:
    """A fresh directory for rendering, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=scratch_parent()))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
