"""ACCT-010 names the seed of a failing round, and --hypothesis-seed replays that round first."""

from __future__ import annotations

import re

import pytest
from certification_run import certify

from cci_conformance.paths import MUTANTS_DIR

pytestmark = [pytest.mark.slow, pytest.mark.integration]

MUTANT = MUTANTS_DIR / "siblings-not-denied"  # places DENIED like PREFERRED: the interleavings catch it
TOPOLOGY = "server-2s8c-smt2-intel"
SEED = re.compile(r"\(hypothesis seed (\d+)\)$")  # the end of the reason, after the broken invariant
REPLAY = re.compile(r"^pytest suites/test_stateful.py (.*?)--cci-topology (\S+) --hypothesis-seed=(\d+)$")


def failing_seed(result) -> int:
    """The seed the reason names, checked against the replay command, which is a field of its own (issue 26):
    the reason is the broken invariant, first and whole."""
    reason, replay = result.reasons["ACCT-010"], (result.replays or {}).get("ACCT-010", "")
    found, command = SEED.search(reason), REPLAY.match(replay)
    assert found, f"the ACCT-010 failure does not name its seed: {reason[:600]}"
    assert command, f"the ACCT-010 failure has no replay command of its own: {replay!r}"
    assert "replay:" not in reason, reason  # the command is not in front of the rule any more
    assert found.group(1) == command.group(3) and command.group(2) == TOPOLOGY, (reason, replay)
    assert f"--cci-driver {MUTANT}" in command.group(1), replay  # the replay runs the driver that failed
    return int(found.group(1))


def test_a_failure_names_its_seed_and_the_seed_replays_it_in_the_first_round():
    first = certify(MUTANT, [TOPOLOGY], ["test_stateful.py"])
    assert first.statuses["ACCT-010"] == "fail", first.reasons.get("ACCT-010", first.output)
    seed = failing_seed(first)
    again = certify(MUTANT, [TOPOLOGY], ["test_stateful.py"], [f"--hypothesis-seed={seed}"])
    assert again.statuses["ACCT-010"] == "fail", again.reasons.get("ACCT-010", again.output)
    # the chain starts at the given seed, so failing under the same seed means its very first round failed
    assert failing_seed(again) == seed, again.reasons["ACCT-010"]
