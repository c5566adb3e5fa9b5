"""Child processes in their own process group, signalled only while their leader's pid cannot be reused.

Every node and driver starts with ``start_new_session=True``, so its pid is also its process-group id.
Once the leader is reaped (``Popen.poll``/``wait``), the kernel may hand that number to a new process,
and a later ``killpg`` would hit it: on a busy machine with ``pid_max`` 32768 that can be another test's
node. So these helpers look at a child's state without reaping it (``waitid`` with ``WNOWAIT``): an
exited leader stays a zombie, its pid reserved, until the group has been signalled and it is reaped.
"""

from __future__ import annotations

import os
import signal
import subprocess

from .waiting import WaitTimeout, wait_for


def _peek(proc: subprocess.Popen) -> os.waitid_result | None:
    """The exit of an unreaped child, or None while it runs; the child stays unreaped."""
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # reaped by someone else: report it as gone
        proc.wait()
        return None


def running(proc: subprocess.Popen | None) -> bool:
    """Whether the child still runs (never reaps it, unlike ``Popen.poll``)."""
    if proc is None or proc.returncode is not None:
        return False
    return _peek(proc) is None and proc.returncode is None  # _peek sets returncode if reaped elsewhere


def exit_status(proc: subprocess.Popen | None) -> int | None:
    """``Popen.returncode`` semantics (negative: killed by that signal), without reaping; None while it runs."""
    if proc is None or proc.returncode is not None:
        return None if proc is None else proc.returncode
    info = _peek(proc)
    if info is None:
        return proc.returncode
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def signal_group(proc: subprocess.Popen | None, sig: int) -> None:
    """Signal the child's process group, only while its leader is unreaped (else the id may be anyone's)."""
    if proc is None or proc.returncode is not None:
        return
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_group(proc: subprocess.Popen | None, grace_s: float = 0.0) -> int | None:
    """SIGTERM the group and wait up to ``grace_s`` for the leader (0: SIGKILL at once), then SIGKILL what
    is left of the group and reap the leader; returns its exit status."""
    if proc is None:
        return None
    if grace_s > 0 and running(proc):
        signal_group(proc, signal.SIGTERM)
        try:
            wait_for(lambda: not running(proc), grace_s, interval=0.01, what=f"process {proc.pid} to exit")
        except WaitTimeout:
            pass  # SIGKILL below
    signal_group(proc, signal.SIGKILL)  # stragglers in the group, and the leader if it still runs
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
        pass
    return proc.returncode
