"""Host-wide exclusive locks on a file (flock), taken within a deadline; what two processes must not do at once."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from .waiting import wait_for

_held: dict[str, int] = {}  # lock file -> depth of this process's re-entrant holds
_guard = threading.Lock()


@contextlib.contextmanager
def held(lock_file: Path, wait_s: float, what: str, reentrant: bool = False, shared: bool = False) -> Iterator[None]:
    """Hold ``lock_file`` for the block, waiting at most ``wait_s`` for another holder (WaitTimeout names ``what``
    and the holder's pid). ``reentrant``: a block nested in one of this process's own holds goes straight in (an
    image build that builds another image); otherwise a second hold in one process waits like another process.
    ``shared``: any number of shared holders at once, none beside an exclusive one (flock's LOCK_SH)."""
    if shared:
        with _shared(lock_file, wait_s, what):
            yield
        return
    key = str(Path(lock_file).resolve())
    if reentrant:
        with _guard:
            if _held.get(key):
                _held[key] += 1
                nested = True
            else:
                nested = False
        if nested:
            try:
                yield
            finally:
                with _guard:
                    _held[key] -= 1
            return
    with open(lock_file, "a+") as handle:
        def taken() -> bool:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

        def holder() -> str:
            handle.seek(0)
            pid = handle.read().strip()
            return f" (held by pid {pid})" if pid else ""
        if not taken():
            try:
                wait_for(taken, wait_s, interval=0.5, what=f"{what}: the lock {lock_file}")
            except TimeoutError as exc:
                raise type(exc)(f"{exc}{holder()}") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        if reentrant:
            with _guard:
                _held[key] = 1
        try:
            yield
        finally:
            if reentrant:
                with _guard:
                    _held.pop(key, None)
            handle.seek(0)
            handle.truncate()
            handle.flush()
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def _shared(lock_file: Path, wait_s: float, what: str) -> Iterator[None]:
    with open(lock_file, "a+") as handle:
        def taken() -> bool:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

        if not taken():
            wait_for(taken, wait_s, interval=0.05, what=f"{what}: the lock {lock_file}")
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
