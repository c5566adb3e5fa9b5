"""Every mutant driver is caught by the requirement(s) it targets, and by nothing unrelated."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from certification_run import certify

from cci_conformance.paths import MUTANTS_DIR, SUITES_DIR

pytestmark = [pytest.mark.slow, pytest.mark.integration]

TARGETS_FILE = MUTANTS_DIR / "targets.yaml"
CATALOG_FILE = SUITES_DIR / "requirements.yaml"


def load_targets() -> dict[str, dict]:
    data = yaml.safe_load(TARGETS_FILE.read_text())
    return data["mutants"]


def load_node_obligations() -> dict[str, str]:
    """Requirement id -> why no driver defect can make its tests fail (the node alone decides them)."""
    data = yaml.safe_load(TARGETS_FILE.read_text())
    return data.get("node_obligations") or {}


def catalog_ids() -> set[str]:
    return {r["id"] for r in yaml.safe_load(CATALOG_FILE.read_text())["requirements"]}


def test_every_requirement_has_a_mutant_or_is_a_node_obligation():
    """The standard: every requirement is proven able to fail by a mutant, or is recorded (with its reason)
    as an obligation of the node that no driver can break. Nothing may fall between the two."""
    ids = catalog_ids()
    targeted = {rid for entry in load_targets().values() if not entry.get("suite_gap") for rid in entry["targets"]}
    gaps = {rid for entry in load_targets().values() if entry.get("suite_gap") for rid in entry["targets"]}
    obligations = load_node_obligations()
    assert not targeted - ids, f"targets.yaml names requirements the catalog does not have: {sorted(targeted - ids)}"
    assert not set(obligations) - ids, f"node_obligations not in the catalog: {sorted(set(obligations) - ids)}"
    both = targeted & set(obligations)
    assert not both, f"requirements with a mutant are listed as node obligations too: {sorted(both)}"
    # a requirement whose only mutant passes it (a known false pass of the suite, `suite_gap`) is not
    # proven able to fail, but it is recorded, not silent
    neither = ids - targeted - set(obligations) - gaps
    assert not neither, f"requirements with neither a mutant nor a node_obligations entry: {sorted(neither)}"
    for rid, why in obligations.items():
        assert isinstance(why, str) and len(why) >= 20, f"node_obligations[{rid}] needs its reason"
    readme = (MUTANTS_DIR / "README.md").read_text()
    section = readme.split("## Requirements no driver can break", 1)
    assert len(section) == 2 or not obligations, "README.md lacks the section 'Requirements no driver can break'"
    for rid in obligations:
        assert rid in section[1], f"README.md's 'Requirements no driver can break' does not explain {rid}"
    known = readme.split("## Known false passes of the suites", 1)
    for name, entry in load_targets().items():
        if entry.get("suite_gap"):
            assert len(known) == 2 and f"`{name}`" in known[1], \
                f"README.md's 'Known false passes of the suites' does not explain {name}"


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
def test_mutant_fails_exactly_its_target_requirements(name, request):
    entry = load_targets()[name]
    if entry.get("suite_gap"):  # strict: once the suite catches the mutant, this entry must be updated
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"suite gap: {entry['suite_gap']}"))
    topologies = entry.get("topologies") or [entry["topology"]]  # several: growth across machine sizes
    extra = ["--cci-profile", str(MUTANTS_DIR / name / entry["profile"])] if entry.get("profile") else None
    result = certify(Path(MUTANTS_DIR / name), topologies, entry.get("modules"), extra)
    failed = result.with_status("fail")
    expected = set(entry["targets"])
    missed = expected - failed
    unrelated = failed - expected
    untested = result.with_status("untested")
    assert not missed, f"{name} was not caught by {sorted(missed)}: " + \
        "; ".join(f"{r}: {result.statuses.get(r)}" for r in sorted(missed))
    assert not unrelated, f"{name} also failed unrelated requirements: " + \
        "; ".join(f"{r}: {result.reasons[r][:2000]}\n{result.evidence_for(r)}" for r in sorted(unrelated))
    if not entry.get("modules"):  # a run of every suite leaves nothing untested
        assert not untested, f"{name}: untested {sorted(untested)}"
    assert result.exit_code == 1
