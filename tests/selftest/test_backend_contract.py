"""A backend without a hook makes its tests not-applicable with the reason; a snapshot without a field never passes."""

from __future__ import annotations

import json

from example_suite import CATALOG, plugin_args, statuses, write_suite

from cci_conformance.backends.base import FEATURES

pytest_plugins = ["pytester"]

# REG-002/ROBUST-007 stand for the suites' tests that need a hook; CLAIM-001 for one that needs none.
HOOK_CATALOG = CATALOG + """\
  - {id: REG-002, area: claims, text: "The endpoint MUST serve.", source: "KEP-3675 l.7", capability: null,
     required: true, tests: []}
  - {id: ROBUST-007, area: claims, text: "A hang MUST time out.", source: "KEP-3675 l.8", capability: null,
     required: true, tests: []}
"""

HOOK_TESTS = """\
import pytest
from cci_conformance.certify.outcomes import require_feature


@pytest.mark.requirement("REG-002")
def test_endpoint(node):
    require_feature(node, "cci-endpoint")
    assert False, "ran without the hook"


@pytest.mark.requirement("ROBUST-007")
def test_hang(node):
    require_feature(node, "driver-pause")
    node.pause_driver()


@pytest.mark.requirement("CLAIM-001")
def test_plain(node):
    assert node.snapshot().drivers
"""


def _run(pytester, tests: str, driver: str = "good", catalog: str = CATALOG):
    root = write_suite(pytester.path, tests=tests, catalog=catalog)
    result = pytester.runpytest_inprocess(*plugin_args(root, driver=driver))
    return result, json.loads((root / "out" / "report.json").read_text())


def test_a_missing_hook_is_not_applicable_with_the_backends_reason(pytester):
    result, report = _run(pytester, HOOK_TESTS, catalog=HOOK_CATALOG)
    result.assert_outcomes(passed=2, skipped=4)  # two topologies each
    status = statuses(report)
    assert status["REG-002"] == status["ROBUST-007"] == "not-applicable" and status["CLAIM-001"] == "pass"
    reasons = {r["id"]: r["reason"] for r in report["requirements"]}
    for rid, feature in (("REG-002", "cci-endpoint"), ("ROBUST-007", "driver-pause")):
        assert reasons[rid].startswith("not applicable on this backend: backend fake cannot "), reasons[rid]
        assert FEATURES[feature].split(": ", 1)[1] in reasons[rid] and feature in reasons[rid], reasons[rid]


MISSING_FIELD_TESTS = """\
import pytest
from cci_conformance.node.api import ClaimRef, ContainerSpec, PodSpec


@pytest.mark.requirement("CLAIM-001")
def test_nothing_owed_after_a_delete(node, pods):
    pod = PodSpec("default", "p", "p", (ContainerSpec("c", claim="cl"),),
                  (ClaimRef("cl", "u-p", {"cores": ["1"], "cpu attributes": [["EXCLUSIVE"]]}),))
    assert pods.create(pod).admitted
    pods.delete("p")
    assert not node.snapshot().pending  # would pass if a missing field defaulted to "nothing owed"
"""


def test_a_snapshot_without_a_field_fails_loudly_never_passes(pytester):
    result, report = _run(pytester, MISSING_FIELD_TESTS, driver="nopending")
    result.assert_outcomes(failed=2)  # one per topology
    assert "missing 1 required positional argument: 'pending'" in result.stdout.str()
    assert statuses(report)["CLAIM-001"] == "fail"
    assert report["verdict"]["certified"] is False
