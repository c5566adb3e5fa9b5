"""Every mutant driver is caught by the requirement(s) it targets, and by nothing unrelated."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from certification_run import certify

from cci_conformance.paths import MUTANTS_DIR

pytestmark = [pytest.mark.slow, pytest.mark.integration]

TARGETS_FILE = MUTANTS_DIR / "targets.yaml"


def load_targets() -> dict[str, dict]:
    data = yaml.safe_load(TARGETS_FILE.read_text())
    return data["mutants"]


def test_every_mutant_folder_has_a_target_entry_and_the_readme_lists_it():
    folders = {p.parent.name for p in MUTANTS_DIR.glob("*/driver.yaml")}
    targets = load_targets()
    assert folders == set(targets), f"folders without targets: {folders - set(targets)}; " \
                                    f"targets without a folder: {set(targets) - folders}"
    readme = (MUTANTS_DIR / "README.md").read_text()
    for name, entry in targets.items():
        row = next((line for line in readme.splitlines() if line.startswith(f"| `{name}`")), "")
        assert row, f"README.md has no row for {name}"
        for rid in entry["targets"]:
            assert rid in row, f"README.md row of {name} does not name {rid}"


@pytest.mark.parametrize("name", sorted(load_targets()))
def test_mutant_fails_exactly_its_target_requirements(name):
    entry = load_targets()[name]
    result = certify(Path(MUTANTS_DIR / name), [entry["topology"]], entry.get("modules"))
    failed = result.with_status("fail")
    expected = set(entry["targets"])
    missed = expected - failed
    unrelated = failed - expected
    untested = result.with_status("untested")
    assert not missed, f"{name} was not caught by {sorted(missed)}: " + \
        "; ".join(f"{r}: {result.statuses.get(r)}" for r in sorted(missed))
    assert not unrelated, f"{name} also failed unrelated requirements: " + \
        "; ".join(f"{r}: {result.reasons[r][:200]}" for r in sorted(unrelated))
    if not entry.get("modules"):  # a run of every suite leaves nothing untested
        assert not untested, f"{name}: untested {sorted(untested)}"
    assert result.exit_code == 1
