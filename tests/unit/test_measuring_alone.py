"""Latency measurements of two processes never overlap: the second waits for the host's lock, within a deadline."""

from __future__ import annotations

import pytest

from cci_conformance.certify.measuring import measuring_alone
from cci_conformance.waiting import WaitTimeout


def test_a_second_measurement_waits_for_the_first_and_then_runs(tmp_path):
    lock = tmp_path / "latency.lock"
    with measuring_alone(lock, wait_s=5):
        # flock locks belong to the open file, so a second open in this process stands for another process
        with pytest.raises(WaitTimeout, match="another process is measuring"), measuring_alone(lock, wait_s=0.3):
            pytest.fail("measured beside another measurement")
    with measuring_alone(lock, wait_s=0.3):
        pass  # released: the next one gets it at once
