"""A driver the node refuses to register: the session's error carries the node's reason, not just a timeout."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import yaml

from cci_conformance.backends.base import SessionConfig
from cci_conformance.backends.registry import get_backend
from cci_conformance.paths import PROFILES_DIR, PROJECT_ROOT
from cci_conformance.topology import library
from cci_conformance.waiting import WaitTimeout

pytestmark = pytest.mark.integration

WRONG_VERSION = PROJECT_ROOT / "drivers_under_test" / "mutants" / "wrong-version" / "driver.yaml"


def test_wrong_version_refusal_reason_reaches_the_vendor():
    workdir = Path(tempfile.mkdtemp(prefix="cci-", dir="/tmp"))
    profile = yaml.safe_load((PROFILES_DIR / "node" / "coexistence.yaml").read_text())
    config = SessionConfig(library.load("laptop-1s4c-smt2"), profile, WRONG_VERSION, workdir)
    with pytest.raises(WaitTimeout) as err:
        get_backend("embedded").open(config)
    message = str(err.value)
    assert "node refused driver" in message, message
    # the node's own reason: the versions the driver offered and the one the node speaks
    assert "v1beta1" in message and "v1alpha1" in message, message
    assert not workdir.exists(), "a failed open must still remove its workdir"
