"""Latency measurements overlap no other process's measurement and no other worker's test (deadlines kept)."""

from __future__ import annotations

import contextlib
import fcntl
import subprocess
import sys

import pytest

from cci_conformance.certify.measuring import gate_of, hold_while_testing, let_measurements_in, measuring_alone
from cci_conformance.waiting import WaitTimeout, wait_for


def test_a_second_measurement_waits_for_the_first_and_then_runs(tmp_path):
    lock = tmp_path / "latency.lock"
    with measuring_alone(lock, wait_s=5):
        # flock locks belong to the open file, so a second open in this process stands for another process
        with pytest.raises(WaitTimeout, match="another process is measuring"), measuring_alone(lock, wait_s=0.3):
            pytest.fail("measured beside another measurement")
    with measuring_alone(lock, wait_s=0.3):
        pass  # released: the next one gets it at once


@contextlib.contextmanager
def other_process(lock, hold: str):
    """Another process holding ``hold_while_testing`` or ``measuring_alone`` on ``lock`` until the block ends."""
    code = (f"import sys; from cci_conformance.certify.measuring import {hold}\n"
            f"with {hold}({str(lock)!r}, wait_s=10):\n    print('held', flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        yield
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def test_a_measurement_waits_for_another_workers_test_and_a_test_for_a_measurement(tmp_path):
    """A spread run's worker holds the lock shared while a test runs (certify/measuring.py): a fill elsewhere does
    not start beside it, and no test starts beside a fill."""
    lock = tmp_path / "latency.lock"
    with other_process(lock, "hold_while_testing"):
        with pytest.raises(WaitTimeout, match="running a test beside a measurement"), \
                measuring_alone(lock, wait_s=0.3):
            pytest.fail("measured beside another worker's test")
        with hold_while_testing(lock, wait_s=0.3):
            pass  # tests of two workers run side by side
    with other_process(lock, "measuring_alone"):
        with pytest.raises(WaitTimeout, match="a measurement is running"), hold_while_testing(lock, wait_s=0.3):
            pytest.fail("a test started beside a measurement")
    with measuring_alone(lock, wait_s=0.3):
        pass  # both released


def another_process_can_measure(lock) -> bool:
    code = ("import sys; from cci_conformance.certify.measuring import measuring_alone\n"
            f"with measuring_alone({str(lock)!r}, wait_s=0.3):\n    pass")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=30).returncode == 0


def test_the_test_that_measures_does_not_wait_for_its_own_hold(tmp_path):
    lock = tmp_path / "latency.lock"
    with hold_while_testing(lock, wait_s=5):
        assert not another_process_can_measure(lock)
        with measuring_alone(lock, wait_s=0.3):
            pass
        assert not another_process_can_measure(lock), "the test's hold was not taken back after its measurement"
    assert another_process_can_measure(lock)


def gate_held(lock) -> bool:
    """Whether a measurement holds the gate (it does while it waits for the tests beside it to end)."""
    with open(gate_of(lock), "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def test_a_long_test_lets_a_waiting_measurement_in_between_two_steps(tmp_path):
    lock = tmp_path / "latency.lock"
    with hold_while_testing(lock, wait_s=5):
        let_measurements_in(lock, wait_s=5)  # nobody waiting: the test goes straight on
        assert not another_process_can_measure(lock)
        code = ("import sys; from cci_conformance.certify.measuring import measuring_alone\n"
                f"with measuring_alone({str(lock)!r}, wait_s=10):\n    print('measured', flush=True)")
        waiting = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        try:
            # the measurement holds the gate once it waits; the test's next step lets it in and waits for its end
            wait_for(lambda: gate_held(lock), 10, interval=0.05, what="the measurement to wait at the gate")
            let_measurements_in(lock, wait_s=10)
            assert waiting.wait(timeout=30) == 0 and waiting.stdout.read().strip() == "measured"
        finally:
            waiting.kill()
            waiting.wait()
        assert not another_process_can_measure(lock), "the test's hold was not taken back"
