"""The plugin turns SIGTERM into pytest's Ctrl-C path, even when a test swallows the KeyboardInterrupt."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

TESTS = """
import os, signal

def test_terminated():
    os.kill(os.getpid(), signal.SIGTERM)
    [None for _ in range(1000)]  # the handler runs between bytecodes

def test_never_runs():
    pass
"""

SWALLOWING = """
import os, signal

def test_swallows_the_interrupt():
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        [None for _ in range(1000)]
    except BaseException:  # code under test that catches everything: the run must still stop
        pass

def test_never_runs():
    pass
"""


@pytest.mark.parametrize("source", [TESTS, SWALLOWING], ids=["raised", "swallowed"])
def test_sigterm_interrupts_the_run(pytester, source):
    pytester.makepyfile(test_it=source)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")  # a process of its own, its main thread
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    assert "test_never_runs PASSED" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*KeyboardInterrupt*" if source is TESTS else "*Interrupted: interrupted by SIGTERM*"])
