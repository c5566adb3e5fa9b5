"""The base every driver serves (docs/spec.md S1.11): the catalog and the suites never ask a capability for it."""

from __future__ import annotations

import ast

import pytest

from cci_conformance.certify.catalog import load_catalog
from cci_conformance.paths import SUITES_DIR
from cci_conformance.protocol.capabilities import (
    BASE_CAPABILITIES,
    OPTIONAL_CAPABILITIES,
    capabilities_used,
    needed_capabilities,
)
from cci_conformance.protocol.claims import parse_claim


def needs_markers() -> list[tuple[str, str, str]]:
    """(module, test, capability) of every @pytest.mark.needs(...) in the suites."""
    found = []
    for path in sorted(SUITES_DIR.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef):
                continue
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") == "needs":
                    found += [(path.name, node.name, arg.value) for arg in deco.args if isinstance(arg, ast.Constant)]
    return found


def test_no_suite_test_needs_a_base_capability():
    """A test that needs `exclusive` or `shared` would be skipped for a driver declaring only the base."""
    bad = [m for m in needs_markers() if m[2] in BASE_CAPABILITIES]
    assert not bad, f"@pytest.mark.needs names a base capability: {bad}"
    assert {m[2] for m in needs_markers()} <= set(OPTIONAL_CAPABILITIES)


def test_every_test_needs_exactly_its_requirements_capability():
    """Catalog `capability:` and @pytest.mark.needs agree: a capability requirement's tests need it (else they
    would send its claims to drivers without it), and a base requirement's tests need nothing (else a driver
    declaring only the base would leave it untested)."""
    needs: dict[str, set[str]] = {}
    for module, test, cap in needs_markers():
        needs.setdefault(f"{module}::{test}", set()).add(cap)
    catalog = load_catalog()
    wrong = [(r.id, t, sorted(needs.get(t, ())), r.capability) for r in catalog.requirements for t in r.tests
             if needs.get(t, set()) != ({r.capability} if r.capability else set())]
    assert not wrong, "requirement, test, @needs, catalog capability: " + "; ".join(map(str, wrong))


@pytest.mark.parametrize(("parameters", "needed"), [
    ({"cores": ["3"]}, []),
    ({"cores": ["2"], "cpu attributes": [["EXCLUSIVE"]]}, []),
    ({"cores": ["2"], "cpu attributes": [["SHARED"]], "mem attributes": ["NO-MEM-AFFINITY"],
      "device attributes": ["NO-DEVICE-AFFINITY"]}, []),
    ({"cores": ["2"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-PREFERRED"]]}, []),  # the base placement
    ({"cores": ["2"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-DENIED"]]}, ["core-siblings"]),
    ({"cores": ["2"], "cpu attributes": [["SHARED", "CORE-SIBLING-REQUIRED"]]}, ["core-siblings"]),
    ({"cores": ["2"], "mem attributes": ["NUMA-MEM-AFFINITY-BIND-PREFERRED"]}, ["numa-bind"]),
    ({"cores": ["2"], "mem attributes": ["NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED"]}, ["numa-interleave"]),
    ({"cores": ["2"], "device attributes": [{"affinity": "NUMA-DEVICE-AFFINITY-PREFERRED", "device": "0000:3b:00.0"}]},
     ["device-affinity"]),
    ({"cores": ["1-3"]}, ["core-ranges"]),
    ({"cores": ["1", "2"], "cpu attributes": [["EXCLUSIVE"], ["SHARED", "CORE-SIBLING-DENIED"]]}, None),  # S2.10
    ({"cores": ["1", "2"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-DENIED"], ["SHARED"]]},
     ["core-siblings", "groups"]),
])
def test_needed_capabilities_of_a_claim(parameters, needed):
    if needed is None:  # a contradiction is a claim error for every driver, not a capability question
        with pytest.raises(Exception, match="DENIED"):
            parse_claim(parameters, None, ("core-ranges",))
        return
    assert needed_capabilities(parse_claim(parameters, None, ("core-ranges",))) == needed


@pytest.mark.parametrize(("parameters", "used"), [
    ("four arrays, please", []),
    ({"cores": ["2"], "colour": ["blue"]}, []),
    ({"cores": ["1-3"]}, ["core-ranges"]),
    ({"cores": ["2"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-PREFERRED"]]}, ["core-siblings"]),  # S1.11
    # malformed parameters still use what they name: a driver without it may refuse them for that alone
    ({"cores": ["1", "1"], "cpu attributes": [["EXCLUSIVE"], ["TURBO"]]}, ["groups"]),
    ({"cores": ["1"], "cpu attributes": [["SHARED", "CORE-SIBLING-DENIED"]]}, ["core-siblings"]),
    ({"cores": ["1"], "device attributes": ["NUMA-DEVICE-AFFINITY-REQUIRED"]}, ["device-affinity"]),
    ({"cores": ["x-1"], "mem attributes": [["NUMA-MEM-AFFINITY-INTERLEAVE-PREFERRED"]]}, ["numa-interleave"]),
    ({"cores": ["1"], "cpu attributes": [["EXCLUSIVE"], ["SHARED"]]}, []),  # one group, a bad array
    ('{"cores": ["2", "1-2"], "mem attributes": ["NUMA-MEM-AFFINITY-BIND-REQUIRED", "NO-MEM-AFFINITY"]}',
     ["numa-bind", "core-ranges", "groups"]),
])
def test_capabilities_a_claims_parameters_use(parameters, used):
    assert capabilities_used(parameters) == used


def test_capabilities_used_agrees_with_the_parsed_claim_on_well_formed_parameters():
    for parameters in ({"cores": ["1-3"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-DENIED"]]},
                       {"cores": ["2", "2"], "device attributes": [
                           {"affinity": "NUMA-DEVICE-AFFINITY-PREFERRED", "device": "0000:3b:00.0"},
                           "NO-DEVICE-AFFINITY"]}):
        assert capabilities_used(parameters) == needed_capabilities(parse_claim(parameters, None, ("core-ranges",)))
