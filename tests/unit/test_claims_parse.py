"""Claim parameters: valid forms parse to the right groups; every malformed form is a ClaimError naming the fix."""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cci_conformance.protocol.claims import SCHEMA_PATH, ClaimError, ClaimRequest, claim_json, parse_claim
from cci_conformance.topology import library

INTEL = library.load("server-2s8c-smt2-intel")  # 2 nodes, SMT2, devices 0000:17:00.0 (node 0), 0000:b1:00.0 (node 1)
CXL = library.load("memory-tiers-cxl")  # device 0000:38:00.0 sits on a CPU-less node
SCHEMA = json.loads(SCHEMA_PATH.read_text())
KEP_EXAMPLE = {
    "cores": ["5", "20"],
    "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-PREFERRED"], ["SHARED"]],
    "mem attributes": ["NUMA-MEM-AFFINITY-BIND-REQUIRED", "NO-MEM-AFFINITY"],
    "device attributes": [{"affinity": "NUMA-DEVICE-AFFINITY-REQUIRED", "device": "0000:17:00.0"},
                          "NO-DEVICE-AFFINITY"],
}


def test_the_kep_worked_example_parses():
    claim = parse_claim(json.dumps(KEP_EXAMPLE), INTEL)
    g0, g1 = claim.groups
    assert (g0.count, g0.exclusive, g0.siblings, g0.mem, g0.device, g0.device_affinity) == (
        5, True, "preferred", "bind-required", "0000:17:00.0", "required")
    assert (g1.count, g1.exclusive, g1.siblings, g1.mem, g1.device) == (20, False, "preferred", "none", None)
    assert claim.exclusive is True
    jsonschema.validate(KEP_EXAMPLE, SCHEMA)


def test_defaults_when_only_cores_is_given():
    claim = parse_claim({"cores": ["2"]})
    (g,) = claim.groups
    assert (g.exclusive, g.siblings, g.mem, g.device_affinity) == (False, "preferred", "none", "none")
    assert claim.exclusive is False


@pytest.mark.parametrize("attr, mode", [("CORE-SIBLING-REQUIRED", "required"), ("CORE-SIBLING-DENIED", "denied"),
                                        ("CORE-SIBLING-PREFERRED", "preferred")])
def test_sibling_attributes(attr, mode):
    claim = parse_claim({"cores": ["4"], "cpu attributes": [["EXCLUSIVE", attr]]}, INTEL)
    assert claim.groups[0].siblings == mode


def test_range_with_the_capability():
    g = parse_claim({"cores": ["2-6"]}, capabilities=("core-ranges",)).groups[0]
    assert (g.min_count, g.max_count, g.is_range) == (2, 6, True)


def test_integer_count_is_accepted():
    assert parse_claim({"cores": [3]}).groups[0].count == 3


BAD = [
    ("not json", "{", "not valid JSON"),
    ("not an object", "[1]", "not a JSON object"),
    ("unknown key", {"cores": ["1"], "gpu attributes": [[]]}, "unknown key 'gpu attributes'"),
    ("no cores", {"cpu attributes": [["SHARED"]]}, "`cores`: missing or empty"),
    ("empty cores", {"cores": []}, "`cores`: missing or empty"),
    ("count not a number", {"cores": ["four"]}, "`cores`[0]: 'four' is not a number"),
    ("count is a float", {"cores": [1.5]}, "`cores`[0]: 1.5 is not a count"),
    ("count is a bool", {"cores": [True]}, "`cores`[0]: True is not a count"),
    ("zero count", {"cores": ["2", "0"]}, "`cores`[1]: a count of 0"),
    ("negative", {"cores": ["-2"]}, "`cores`[0]"),
    ("range without capability", {"cores": ["1-4"]}, "needs the `core-ranges` capability"),
    ("lengths differ", {"cores": ["1", "2"], "cpu attributes": [["SHARED"]]},
     "`cpu attributes`: has 1 entries but `cores` has 2"),
    ("array not a list", {"cores": ["1"], "mem attributes": "NO-MEM-AFFINITY"}, "`mem attributes`: is not an array"),
    ("exclusive and shared", {"cores": ["1"], "cpu attributes": [["EXCLUSIVE", "SHARED"]]},
     "`cpu attributes`[0]: EXCLUSIVE and SHARED contradict"),
    ("required and denied", {"cores": ["2"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-REQUIRED",
                                                                 "CORE-SIBLING-DENIED"]]},
     "CORE-SIBLING-REQUIRED and CORE-SIBLING-DENIED contradict"),
    ("denied without exclusive", {"cores": ["2"], "cpu attributes": [["CORE-SIBLING-DENIED"]]}, "add EXCLUSIVE"),
    ("unknown cpu attribute", {"cores": ["1"], "cpu attributes": [["EXCLUSIVE", "TURBO"]]},
     "`cpu attributes`[0]: unknown attribute 'TURBO'"),
    ("duplicate attribute", {"cores": ["1"], "cpu attributes": [["EXCLUSIVE", "EXCLUSIVE"]]}, "listed twice"),
    ("cpu attributes not strings", {"cores": ["1"], "cpu attributes": [[1]]}, "not a list of attribute names"),
    ("unknown mem attribute", {"cores": ["1"], "mem attributes": ["HUGE_PAGE_SIZE_1M"]},
     "`mem attributes`[0]: unknown attribute 'HUGE_PAGE_SIZE_1M'"),
    ("mem attribute wrong type", {"cores": ["1"], "mem attributes": [{"a": 1}]}, "`mem attributes`[0]"),
    ("device affinity without device", {"cores": ["1"], "device attributes": ["NUMA-DEVICE-AFFINITY-REQUIRED"]},
     "needs the device named"),
    ("bad device address", {"cores": ["1"], "device attributes": [{"affinity": "NUMA-DEVICE-AFFINITY-REQUIRED",
                                                                   "device": "eth0"}]}, "PCI address"),
    ("unknown device", {"cores": ["1"], "device attributes": [{"affinity": "NUMA-DEVICE-AFFINITY-REQUIRED",
                                                               "device": "0000:99:00.0"}]},
     "`device attributes`[0]: device 0000:99:00.0 does not exist"),
    ("unknown device attribute", {"cores": ["1"], "device attributes": [{"affinity": "CLOSE"}]},
     "unknown attribute 'CLOSE'"),
    ("device affinity as a list", {"cores": ["1"], "device attributes": [{"affinity": ["X"]}]}, "unknown attribute"),
    ("device extra key", {"cores": ["1"], "device attributes": [{"affinity": "NO-DEVICE-AFFINITY", "pci": "x"}]},
     "unknown key 'pci'"),
    ("no affinity names a device", {"cores": ["1"], "device attributes": [{"affinity": "NO-DEVICE-AFFINITY",
                                                                           "device": "0000:17:00.0"}]},
     "NO-DEVICE-AFFINITY names a device"),
    ("device entry wrong type", {"cores": ["1"], "device attributes": [7]}, "neither an attribute name nor"),
    ("interleave vs device", {"cores": ["4"], "mem attributes": ["NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED"],
                              "device attributes": [{"affinity": "NUMA-DEVICE-AFFINITY-REQUIRED",
                                                     "device": "0000:17:00.0"}]}, "contradicts"),
    ("siblings required, odd count", {"cores": ["3"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-REQUIRED"]]},
     "not a multiple of 2"),
]


@pytest.mark.parametrize("case, source, expected", BAD, ids=[b[0] for b in BAD])
def test_malformed_claims_are_claim_errors_that_say_what_is_wrong(case, source, expected):
    src = source if isinstance(source, str) else json.dumps(source)
    with pytest.raises(ClaimError) as err:
        parse_claim(src, INTEL)
    assert expected in str(err.value)
    assert "fix:" in str(err.value)


def test_device_on_a_cpu_less_node_is_refused():
    with pytest.raises(ClaimError, match="no NUMA node with CPUs"):
        parse_claim({"cores": ["1"], "device attributes": [{"affinity": "NUMA-DEVICE-AFFINITY-PREFERRED",
                                                             "device": "0000:38:00.0"}]}, CXL)


def test_range_that_holds_no_whole_core_count_is_refused():
    with pytest.raises(ClaimError, match="multiple of 2"):
        parse_claim({"cores": ["3-3"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-REQUIRED"]]}, INTEL,
                    capabilities=("core-ranges",))
    g = parse_claim({"cores": ["3-4"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-REQUIRED"]]}, INTEL,
                    capabilities=("core-ranges",)).groups[0]
    assert (g.min_count, g.max_count) == (3, 4)


def test_schema_agrees_on_structural_errors():
    for source in ({"cores": []}, {"cores": ["1"], "x": 1}, {"cores": ["1"], "cpu attributes": [["TURBO"]]},
                   {"cores": ["1"], "device attributes": [{"affinity": "NO-DEVICE-AFFINITY", "pci": "x"}]}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(source, SCHEMA)


def test_claim_json_helper_round_trips():
    text = claim_json([{"cores": 2, "cpu": ["EXCLUSIVE"]}, {"cores": 1}])
    jsonschema.validate(json.loads(text), SCHEMA)
    claim = parse_claim(text)
    assert [g.count for g in claim.groups] == [2, 1]


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                           lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(), kids, max_size=4),
                           max_leaves=20)
keys = st.sampled_from(["cores", "cpu attributes", "mem attributes", "device attributes", "other"])


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(keys, json_values, max_size=4) | json_values)
def test_arbitrary_input_gives_a_claim_request_or_a_claim_error(data):
    try:
        result = parse_claim(json.dumps(data), INTEL, capabilities=("core-ranges",))
    except ClaimError:
        return
    assert isinstance(result, ClaimRequest)
