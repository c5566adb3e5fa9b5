"""Host-wide locks, so that a latency measurement runs alone: beside no other measurement, and, in a run spread
over pytest-xdist workers, beside no other worker's test."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..hostlock import held

LOCK_FILE = Path(tempfile.gettempdir()) / "cci-conformance-latency.lock"
# Another process's measurements (a fill and LAT-004's base and probe machines) take minutes on kind.
WAIT_S = 3600.0

# The tests of a run's workers hold the lock shared; a measurement holds it exclusive, so it waits for the tests
# running beside it to end and no other starts until it is done. flock lets shared holders starve an exclusive
# one, so a gate file comes first: a measurement holds the gate while it waits and measures, and a test passes
# the gate before it takes its shared hold.
_tests_held: list[contextlib.ExitStack] = []  # this process's shared hold, while one of its tests runs


def gate_of(lock_file: Path) -> Path:
    lock_file = Path(lock_file)
    return lock_file.with_name(lock_file.name + ".gate")


@contextlib.contextmanager
def measuring_alone(lock_file: Path | None = None, wait_s: float = WAIT_S) -> Iterator[None]:
    """Hold the host's latency lock for the block. Two fills at once on a 2-core host measured each other: on kind
    with `run -n 2` one 8-CPU machine's fill of 6 admissions averaged 26 ms a CCIAdmit at load average 44, its
    other runs 3 ms, and failed LAT-003 for a driver that meets it (docs/kind.md). On the embedded backend with
    two workers the other worker's tests did the same to LAT-005 (an 80-CPU machine's median 2.0 ms empty, 8.3 ms
    filled, at load average 17), so those wait too (``hold_while_testing``)."""
    lock_file = lock_file or LOCK_FILE  # read when called: the harness's own tests give inner runs their own
    own = _tests_held.pop() if _tests_held else None
    if own is not None:
        own.close()  # this process's own test is the one measuring: never wait for ourselves
    try:
        with held(gate_of(lock_file), wait_s, "another process is measuring"), \
                held(lock_file, wait_s, "another process is measuring or running a test beside a measurement"):
            yield
    finally:
        if own is not None:
            _hold_for_test(lock_file, wait_s)


def _hold_for_test(lock_file: Path, wait_s: float) -> None:
    stack = contextlib.ExitStack()
    with held(gate_of(lock_file), wait_s, "a measurement is running", shared=True):
        stack.enter_context(held(lock_file, wait_s, "a measurement is running", shared=True))
    _tests_held.append(stack)


@contextlib.contextmanager
def hold_while_testing(lock_file: Path | None = None, wait_s: float = WAIT_S) -> Iterator[None]:
    """Hold the lock shared while one test runs (a worker of a spread run): a measurement elsewhere waits for
    the end of the test, and a test does not start while a measurement runs."""
    _hold_for_test(lock_file or LOCK_FILE, wait_s)
    try:
        yield
    finally:
        if _tests_held:
            _tests_held.pop().close()


def let_measurements_in(lock_file: Path | None = None, wait_s: float = WAIT_S) -> None:
    """Between two steps of a long test (ACCT-010's examples): a measurement waiting for this process's test runs
    now and the test goes on after it, instead of the measurement waiting for the whole test (18 s and more)."""
    if not _tests_held:
        return
    _tests_held.pop().close()
    _hold_for_test(lock_file or LOCK_FILE, wait_s)  # blocks at the gate while a measurement holds it


class QuietMeasurements:
    """pytest plugin of a worker of a run spread over processes (plugin.py): each test holds the lock shared."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        with hold_while_testing():
            return (yield)
