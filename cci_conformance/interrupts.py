"""SIGTERM handled as Ctrl-C, so a run stopped by CI, ``timeout`` or ``kill`` closes what it opened.

The default action of SIGTERM ends the process at once: no ``finally``, no fixture teardown, no atexit,
so every node and driver the run started (each in a session of its own) is orphaned with its sockets and
scratch directory. Raised as KeyboardInterrupt in the main thread instead, SIGTERM takes pytest's Ctrl-C
path: the test stops, fixtures close their sessions, the report is written as interrupted, exit code 2.

A KeyboardInterrupt can be lost. Python only prints an exception raised while a ``__del__`` or a weakref
finalizer runs, and the handler runs wherever the main thread is: a SIGTERM that landed in gRPC's
``Channel.__del__`` let ACCT-010 run on for 54 s. So when the signal arrives inside a finalizer it is
sent again a moment later instead of raised there. Code under test may also catch BaseException: the
request is remembered, and :func:`pending` tells pytest hooks to stop the run at the next test boundary.
Once the interrupt is being handled (:func:`handling`), later SIGTERMs are ignored: the cleanup they would
cut short is what leaves processes behind, and it is bounded by deadlines (procgroup.stop_group); SIGKILL
remains for the impatient.
"""

from __future__ import annotations

import os
import signal
import threading
import weakref

RESEND_S = 0.05  # a finalizer is short: the signal comes back once it returned
_state = {"requested": False, "handling": False}


def _in_finalizer(frame) -> bool:
    """Whether an exception raised in ``frame`` would end in a ``__del__`` or a weakref finalizer, where
    Python prints it and goes on."""
    while frame is not None:
        code = frame.f_code
        if code.co_name == "__del__" or (code.co_name == "__call__" and code.co_filename == weakref.__file__):
            return True
        frame = frame.f_back
    return False


def _on_sigterm(signum, frame) -> None:
    if _state["handling"]:
        return
    _state["requested"] = True
    if _in_finalizer(frame):
        resend = threading.Timer(RESEND_S, os.kill, (os.getpid(), signum))
        resend.daemon = True
        resend.start()
        return
    raise KeyboardInterrupt(f"terminated by signal {signum} (SIGTERM)")


def install() -> bool:
    """Turn SIGTERM into KeyboardInterrupt; only from the main thread (where Python runs handlers) and only
    over the default action (never over a handler someone else chose, ours included: a run inside a run, as
    pytester's, leaves it to the outer one). True when this call installed it: the caller uninstalls."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        return False
    _state.update(requested=False, handling=False)
    signal.signal(signal.SIGTERM, _on_sigterm)
    return True


def uninstall() -> None:
    """Give SIGTERM its default action back (if our handler is the one in place)."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is _on_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _state.update(requested=False, handling=False)


def pending() -> bool:
    """A SIGTERM arrived and nothing has started handling it yet (its KeyboardInterrupt may have been lost)."""
    return _state["requested"] and not _state["handling"]


def requested() -> bool:
    """Whether a SIGTERM arrived since :func:`install`."""
    return _state["requested"]


def handling() -> None:
    """The interrupt is being handled (pytest reached its KeyboardInterrupt path): ignore further SIGTERMs."""
    _state["handling"] = True
