"""SIGTERM as Ctrl-C (interrupts.py), in child interpreters: the handler is per process and pytest has its own."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip()


def test_sigterm_raises_keyboard_interrupt_once_until_it_is_handled():
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


def test_a_sigterm_landing_in_a_finalizer_is_raised_after_it():
    """Python drops an exception raised in __del__ (gRPC's Channel.__del__ swallowed one): it comes again."""
    out = run("""
        import os, signal, time
        from cci_conformance import interrupts
        interrupts.install()

        class Resource:
            def __del__(self):
                os.kill(os.getpid(), signal.SIGTERM)
                [None for _ in range(1000)]  # the handler runs here, inside __del__
                print("finalizer finished")

        try:
            Resource()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                time.sleep(0.01)
            print("never interrupted")
        except KeyboardInterrupt:
            print("interrupted after the finalizer")
    """)
    assert out.splitlines() == ["finalizer finished", "interrupted after the finalizer"]
