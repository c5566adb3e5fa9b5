"""The DRA mutants' folders, their targets.yaml, the Go driver's list of mutants and the DRA catalog agree."""

from __future__ import annotations

import re

import yaml

from cci_conformance.drivers.manifest import load_manifest
from cci_conformance.paths import DRA_MUTANTS_DIR, DRA_REFERENCE_DIR, SUITES_DIR

TARGETS = yaml.safe_load((DRA_MUTANTS_DIR / "targets.yaml").read_text())
CATALOG = {r["id"] for r in yaml.safe_load((SUITES_DIR / "dra" / "requirements.yaml").read_text())["requirements"]}


def go_mutants() -> set[str]:
    """The names internal/mutant lists in `all` (what --mutant accepts), read from their constants."""
    text = (DRA_REFERENCE_DIR / "internal" / "mutant" / "mutant.go").read_text()
    values = dict(re.findall(r'^\s*(\w+)\s+Name\s*=\s*"([^"]*)"', text, re.M))
    (listed,) = re.findall(r"var all = \[\]Name\{([^}]*)\}", text, re.S)
    return {values[ident] for ident in re.findall(r"\w+", listed)}


def test_every_go_mutant_has_a_folder_and_targets_and_nothing_else_does():
    folders = {p.name for p in DRA_MUTANTS_DIR.iterdir() if p.is_dir()}
    assert folders == go_mutants() == set(TARGETS["mutants"])


def test_each_manifest_builds_the_reference_tree_with_its_own_mutant_flag():
    for name in TARGETS["mutants"]:
        manifest = load_manifest(DRA_MUTANTS_DIR / name)
        assert manifest.protocol == "dra/v1" and manifest.dra_source == DRA_REFERENCE_DIR.resolve()
        assert manifest.dra_args == (f"--mutant={name}",), name
        assert manifest.dra_driver == load_manifest(DRA_REFERENCE_DIR).dra_driver


def test_targets_are_catalog_requirements_and_every_requirement_is_targeted_or_its_gap_recorded():
    targeted = {t for entry in TARGETS["mutants"].values() for t in entry["targets"]}
    unproven = set(TARGETS.get("unproven") or {})
    grouped = {t for entry in TARGETS["mutants"].values() for t in entry.get("grouped_targets", ())}
    assert targeted <= CATALOG and set(TARGETS["guards"]) <= CATALOG and unproven <= CATALOG and grouped <= CATALOG
    # grouped mode may widen a mutant's targets (the same fault seen by more readers), never drop one
    assert all(set(e["targets"]) <= set(e.get("grouped_targets", e["targets"])) for e in TARGETS["mutants"].values())
    assert not targeted & unproven, "a requirement a mutant catches is not a gap"
    assert CATALOG == targeted | unproven, \
        f"neither caught by a mutant nor recorded as a gap: {CATALOG - targeted - unproven}"
    assert all(reason.strip() for reason in TARGETS["unproven"].values())
