"""The run's deadline: given, or the backend's (a kind run takes about an hour on 2 cores)."""

from __future__ import annotations

import pytest

from cci_conformance.certify.cli import RUN_TIMEOUT_S, run_timeout
from cci_conformance.errors import ConfigError


def test_each_backend_has_its_own_default_deadline():
    assert run_timeout(None, "embedded") == 1800
    # a two-machine catalog run on kind took about 70 minutes on 2 cores: 1800 s cut it at test 62 of 138
    assert run_timeout(None, "kind") >= 2 * 3600
    assert run_timeout(None, "another") == max(RUN_TIMEOUT_S.values())


def test_a_given_deadline_wins_and_must_be_positive():
    assert run_timeout(90, "kind") == 90
    with pytest.raises(ConfigError, match="--timeout"):
        run_timeout(0, "embedded")
