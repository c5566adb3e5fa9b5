"""The requirement catalog: the shipped one is valid and complete; every kind of mistake is a ConfigError."""

from __future__ import annotations

import copy
from collections import Counter
from pathlib import Path

import pytest
import yaml

from cci_conformance.certify.catalog import CATALOG_PATH, base_test_id, load_catalog, parse_catalog
from cci_conformance.errors import ConfigError
from cci_conformance.protocol.capabilities import BASE_CAPABILITIES, KNOWN_CAPABILITIES, OPTIONAL_CAPABILITIES

MINIMAL = {
    "version": 1,
    "areas": {"claims": "claims"},
    "requirements": [{"id": "CLAIM-001", "area": "claims", "text": "It MUST work.", "source": "KEP-3675 l.1",
                      "capability": None, "required": True, "tests": ["test_a.py::test_x"]}],
}


def test_the_shipped_catalog_is_valid_and_covers_every_area():
    catalog = load_catalog()
    assert len(catalog.requirements) >= 30
    assert len(set(catalog.ids)) == len(catalog.ids)
    per_area = Counter(r.area for r in catalog.requirements)
    assert set(per_area) == {"claims", "accounting", "restart", "latency", "robustness", "registration"}
    assert all(r.capability is None or r.capability in KNOWN_CAPABILITIES for r in catalog.requirements)
    assert all(" MUST " in f" {r.text} " for r in catalog.requirements)


def test_every_capability_has_a_requirement():
    """Every optional capability has a requirement; the base names (exclusive, shared) never do (spec S1.11)."""
    used = {r.capability for r in load_catalog().requirements}
    assert set(OPTIONAL_CAPABILITIES) <= used
    assert not used & set(BASE_CAPABILITIES)


def test_lookup_by_listed_test():
    catalog = parse_catalog(MINIMAL, Path("cat.yaml"))
    assert catalog.requirements_for_test("suites/test_a.py::test_x") == ["CLAIM-001"]
    assert catalog.requirements_for_test("test_a.py::test_x") == ["CLAIM-001"]
    assert catalog.requirements_for_test("other/test_a.py::test_xy") == []
    assert base_test_id("suites/test_a.py::test_x[laptop-1s4c-smt2]") == "suites/test_a.py::test_x"


def _broken(mutate) -> ConfigError:
    data = copy.deepcopy(MINIMAL)
    mutate(data)
    with pytest.raises(ConfigError) as info:
        parse_catalog(data, Path("cat.yaml"))
    return info.value


@pytest.mark.parametrize("mutate, field, words", [
    (lambda d: d["requirements"].append(dict(d["requirements"][0])), "requirements[CLAIM-001].id", "duplicate"),
    (lambda d: d["requirements"][0].update(capability="teleport"), "requirements[CLAIM-001].capability",
     "unknown capability"),
    (lambda d: d["requirements"][0].update(area="nowhere"), "requirements[CLAIM-001].area", "unknown area"),
    (lambda d: d["requirements"][0].update(text="It should work."), "requirements[CLAIM-001].text", "does not match"),
    (lambda d: d["requirements"][0].update(id="CLAIM-1"), "requirements[CLAIM-1].id", "does not match"),
    (lambda d: d["requirements"][0].update(modes=["beta"]), "requirements[CLAIM-001].modes[0]", "is not one of"),
    (lambda d: d["requirements"][0].update(colour="blue"), "requirements[CLAIM-001]", "unknown key 'colour'"),
    (lambda d: d["requirements"][0].pop("tests"), "requirements[CLAIM-001]", "'tests' is a required property"),
    (lambda d: d["requirements"][0].update(source="somewhere"), "requirements[CLAIM-001].source", "does not match"),
    (lambda d: d["requirements"][0].update(tests=["test_a.py::test_x[laptop]"]), "requirements[CLAIM-001].tests",
     "does not match"),
])
def test_mistakes_name_the_field(mutate, field, words):
    err = _broken(mutate)
    assert err.file == "cat.yaml"
    assert err.field.startswith(field), err.render()
    assert words in err.problem
    assert err.fix


def test_missing_and_unparsable_files(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_catalog(tmp_path / "none.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nareas: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_catalog(bad)


def test_the_shipped_catalog_round_trips_through_yaml():
    data = yaml.safe_load(CATALOG_PATH.read_text())
    assert parse_catalog(data, CATALOG_PATH).ids == load_catalog().ids
