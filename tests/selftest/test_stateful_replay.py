"""ACCT-010 names the seed of a failing round, and --hypothesis-seed replays that round first."""

from __future__ import annotations

import re

import pytest
from certification_run import certify

from cci_conformance.paths import MUTANTS_DIR

pytestmark = [pytest.mark.slow, pytest.mark.integration]

MUTANT = MUTANTS_DIR / "siblings-not-denied"  # places DENIED like PREFERRED: the interleavings catch it
TOPOLOGY = "server-2s8c-smt2-intel"
SEED = re.compile(r"hypothesis seed (\d+) \(replay: pytest suites/test_stateful.py (.*?)--cci-topology (\S+) "
                  r"--hypothesis-seed=(\d+)\)")


def failing_seed(reason: str) -> int:
    found = SEED.search(reason)
    assert found, f"the ACCT-010 failure does not name its seed and the replay command: {reason[:600]}"
    assert found.group(1) == found.group(4) and found.group(3) == TOPOLOGY, found.group(0)
    assert f"--cci-driver {MUTANT}" in found.group(2), found.group(0)  # the replay runs the driver that failed
    return int(found.group(1))


def test_a_failure_names_its_seed_and_the_seed_replays_it_in_the_first_round():
    first = certify(MUTANT, [TOPOLOGY], ["test_stateful.py"])
    assert first.statuses["ACCT-010"] == "fail", first.reasons.get("ACCT-010", first.output)
    seed = failing_seed(first.reasons["ACCT-010"])
    again = certify(MUTANT, [TOPOLOGY], ["test_stateful.py"], [f"--hypothesis-seed={seed}"])
    assert again.statuses["ACCT-010"] == "fail", again.reasons.get("ACCT-010", again.output)
    # the chain starts at the given seed, so failing under the same seed means its very first round failed
    assert failing_seed(again.reasons["ACCT-010"]) == seed, again.reasons["ACCT-010"]
