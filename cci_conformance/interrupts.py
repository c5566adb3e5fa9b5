"""SIGTERM handled as Ctrl-C, so a run stopped by CI, ``timeout`` or ``kill`` closes what it opened.

The default action of SIGTERM ends the process at once: no ``finally``, no fixture teardown, no atexit,
so every node and driver the run started (each in a session of its own) is orphaned with its sockets and
scratch directory. Raised as KeyboardInterrupt in the main thread instead, SIGTERM takes pytest's Ctrl-C
path: the test stops, fixtures close their sessions, the report is written as interrupted, exit code 2.

A KeyboardInterrupt can be lost. The handler runs wherever the main thread is, and Python only prints
(``sys.unraisablehook``) an exception raised in a ``__del__`` or a gc callback: SIGTERMs that landed in
gRPC's ``Channel.__del__`` and in hypothesis's gc callback let ACCT-010 run on for 54 and 56 s. So while
an interrupt is pending, a dropped KeyboardInterrupt has the signal sent again a moment later. Code under
test may also catch BaseException: the request is remembered, and :func:`pending` tells pytest hooks to
stop the run at the next test boundary.
One SIGTERM, one interrupt: later SIGTERMs (a process group signalled twice, say by ``timeout`` and by
the run's own forwarding) are ignored, since the cleanup they would cut short is what leaves processes
behind, and it is bounded by deadlines (procgroup.stop_group); SIGKILL remains for the impatient.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

RESEND_S = 0.05  # a finalizer is short: the signal comes back once it returned
_state = {"requested": False, "handling": False, "dropped": False}


class _ResendIfDropped:
    """``sys.unraisablehook`` once a SIGTERM arrived: Python dropped its KeyboardInterrupt in a finalizer or a
    gc callback, so send the signal again, to land after it; then report as the hook it wraps does."""

    def __init__(self, previous):
        self.previous = previous

    def __call__(self, unraisable) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and pending():
            _state["dropped"] = True
            resend = threading.Timer(RESEND_S, os.kill, (os.getpid(), signal.SIGTERM))
            resend.daemon = True
            resend.start()
        self.previous(unraisable)


def _on_sigterm(signum, frame) -> None:  # noqa: ARG001 - signal handler signature
    if _state["handling"] or (_state["requested"] and not _state["dropped"]):
        return  # one interrupt per run: a second SIGTERM must not cut short the cleanup of the first
    _state.update(requested=True, dropped=False)
    if not isinstance(sys.unraisablehook, _ResendIfDropped):  # set now: pytest replaces it at configure
        sys.unraisablehook = _ResendIfDropped(sys.unraisablehook)
    raise KeyboardInterrupt(f"terminated by signal {signum} (SIGTERM)")


def _on_sigint(signum, frame) -> None:  # noqa: ARG001 - signal handler signature
    """Ctrl-C in a process that runs tests: Python's KeyboardInterrupt, remembered as SIGTERM's is, so that one
    lost in a finalizer or caught by code under test still stops the run at the next test boundary (a kind run
    went on for 195 s past a Ctrl-C). A second Ctrl-C interrupts again, as Python's own handler does."""
    if not _state["requested"]:
        _state.update(requested=True, dropped=False)
        if not isinstance(sys.unraisablehook, _ResendIfDropped):
            sys.unraisablehook = _ResendIfDropped(sys.unraisablehook)
    raise KeyboardInterrupt(f"interrupted by signal {signum} (SIGINT)")


def install_sigint() -> bool:
    """The same for SIGINT, over Python's default handler only; for the processes that run tests (the `run` CLI
    keeps Python's, and forwards Ctrl-C as SIGINT). True when this call installed it."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return False
    signal.signal(signal.SIGINT, _on_sigint)
    return True


def install() -> bool:
    """Turn SIGTERM into KeyboardInterrupt; only from the main thread (where Python runs handlers) and only
    over the default action (never over a handler someone else chose, ours included: a run inside a run, as
    pytester's, leaves it to the outer one). True when this call installed it: the caller uninstalls."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        return False
    _state.update(requested=False, handling=False, dropped=False)
    signal.signal(signal.SIGTERM, _on_sigterm)
    return True


def uninstall() -> None:
    """Give SIGTERM its default action back (if our handler is the one in place)."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is _on_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is _on_sigint:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if isinstance(sys.unraisablehook, _ResendIfDropped):
        sys.unraisablehook = sys.unraisablehook.previous
    _state.update(requested=False, handling=False, dropped=False)


def pending() -> bool:
    """A SIGTERM arrived and nothing has started handling it yet (its KeyboardInterrupt may have been lost)."""
    return _state["requested"] and not _state["handling"]


def requested() -> bool:
    """Whether a SIGTERM arrived since :func:`install`."""
    return _state["requested"]


def handling() -> None:
    """The interrupt is being handled (pytest reached its KeyboardInterrupt path, or the CLI forwards it):
    from now on no SIGTERM raises, not even a first one."""
    _state["handling"] = True
