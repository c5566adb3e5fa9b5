"""SIGTERM as Ctrl-C (interrupts.py), in child interpreters: the handler is per process and pytest has its own."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip()


def test_one_sigterm_one_keyboard_interrupt():
    out = run("""
        import os, signal
        from cci_conformance import interrupts
        assert interrupts.install() and not interrupts.install()  # the second call does not own it
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            [None for _ in range(1000)]  # the handler runs between bytecodes
            print("not interrupted")
        except KeyboardInterrupt as exc:
            print("interrupted:", exc, interrupts.requested(), interrupts.pending())
        os.kill(os.getpid(), signal.SIGTERM)  # a second one, while the first propagates: ignored
        [None for _ in range(1000)]
        interrupts.handling()
        os.kill(os.getpid(), signal.SIGTERM)  # during the cleanup: ignored
        [None for _ in range(1000)]
        print("cleanup went on", interrupts.pending())
        interrupts.uninstall()
        print(signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
    """)
    assert out.splitlines() == ["interrupted: terminated by signal 15 (SIGTERM) True True", "cleanup went on False",
                                "True"]


def test_never_replaces_another_handler_nor_installs_off_the_main_thread():
    out = run("""
        import signal, threading
        from cci_conformance import interrupts
        mine = lambda *a: None
        signal.signal(signal.SIGTERM, mine)
        print(interrupts.install(), signal.getsignal(signal.SIGTERM) is mine)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        result = []
        t = threading.Thread(target=lambda: result.append(interrupts.install()))
        t.start(); t.join()
        print(result[0], signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
    """)
    assert out.splitlines() == ["False True", "False True"]


@pytest.mark.parametrize("where", ["__del__", "gc callback"])
def test_a_sigterm_landing_in_a_finalizer_is_raised_after_it(where):
    """Python drops an exception raised in __del__ or a gc callback (gRPC's Channel.__del__ and hypothesis's
    gc callback swallowed SIGTERM's): the signal comes again and interrupts the code after it."""
    out = run(f"""
        import gc, os, signal, time
        from cci_conformance import interrupts
        interrupts.install()
        fired = []

        def terminate_here(*args):
            if fired:
                return
            fired.append(1)
            os.kill(os.getpid(), signal.SIGTERM)
            [None for _ in range(1000)]  # the handler runs here, inside the finalizer
            print("finalizer left early", flush=True)

        class Resource:
            __del__ = terminate_here

        try:
            if {where!r} == "__del__":
                Resource()
            else:
                gc.callbacks.append(terminate_here)
                gc.collect()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                time.sleep(0.01)
            print("never interrupted")
        except KeyboardInterrupt:
            print("interrupted after the finalizer")
    """)
    assert out.splitlines() == ["interrupted after the finalizer"]


def test_a_ctrl_c_caught_by_code_under_test_is_still_pending():
    """SIGINT in a process that runs tests: a KeyboardInterrupt that code under test swallowed still stops the run
    at the next test boundary (interrupts.pending), and a second Ctrl-C interrupts again."""
    out = run("""
        import os, signal
        from cci_conformance import interrupts
        # a child of an xdist worker inherits SIGINT ignored (execnet ignores it): start from Python's default
        signal.signal(signal.SIGINT, signal.default_int_handler)
        assert interrupts.install() and interrupts.install_sigint() and not interrupts.install_sigint()
        try:
            os.kill(os.getpid(), signal.SIGINT)
            [None for _ in range(1000)]
        except BaseException:  # code under test that swallows it
            pass
        print("pending", interrupts.pending())
        try:
            os.kill(os.getpid(), signal.SIGINT)
            [None for _ in range(1000)]
            print("not interrupted")
        except KeyboardInterrupt as exc:
            print("again:", exc)
        interrupts.uninstall()
        print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    """)
    assert out.splitlines() == ["pending True", "again: interrupted by signal 2 (SIGINT)", "True"]
