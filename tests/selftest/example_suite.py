"""Write small example conformance suites (catalog, conftest, driver manifests, tests) for the plugin self-tests."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

SELFTEST_DIR = Path(__file__).resolve().parent
TOPOLOGIES = ("laptop-1s4c-smt2", "server-2s8c-smt2-intel")

CATALOG = """\
version: 1
areas:
  claims: "claims"
  accounting: "accounting"
requirements:
  - {id: CLAIM-001, area: claims, text: "Counts MUST be right.", source: "KEP-3675 l.1", capability: null,
     required: true, tests: []}
  - {id: CLAIM-006, area: claims, text: "Siblings MUST be kept.", source: "KEP-3675 l.2", capability: core-siblings,
     required: true, tests: []}
  - {id: CLAIM-009, area: claims, text: "NUMA MUST be bound.", source: "KEP-3675 l.3", capability: null,
     required: true, tests: []}
  - {id: ACCT-001, area: accounting, text: "Delete MUST free CPUs.", source: "KEP-3675 l.4", capability: null,
     required: true, tests: ["test_example.py::test_free"]}
  - {id: ACCT-002, area: accounting, text: "This MUST have a test.", source: "KEP-3675 l.5", capability: null,
     required: true, tests: []}
  - {id: ACCT-003, area: accounting, text: "Optional things MUST hold.", source: "KEP-3675 l.6", capability: null,
     required: false, tests: []}
"""

CONFTEST = f"""\
import sys
sys.path.insert(0, {str(SELFTEST_DIR)!r})
import fake_backend  # noqa: E402,F401  registers the "fake" backend
"""

TESTS = """\
import pytest
from cci_conformance.certify.outcomes import not_applicable
from cci_conformance.node.api import ClaimRef, ContainerSpec, PodSpec


def claim_pod(uid, n):
    return PodSpec("default", uid, uid, (ContainerSpec("c", claim="cl"),),
                   (ClaimRef("cl", "u-" + uid, {"cores": [str(n)], "cpu attributes": [["EXCLUSIVE"]]}),))


@pytest.mark.requirement("CLAIM-001")
def test_count(node, pods, record_figure):
    result = pods.create(claim_pod("p1", 2))
    record_figure("admission_p50", result.driver_seconds, "s", budget=0.01, samples=[0.001, 0.002, 0.0015])
    assert result.admitted and len(result.containers[0].cpus) == 2


@pytest.mark.requirement("CLAIM-006")
@pytest.mark.needs("core-siblings")
def test_siblings(node):
    pass


@pytest.mark.requirement("CLAIM-009")
def test_numa(topology):
    if len(topology.nodes) < 2:
        not_applicable(f"{topology.name} has one NUMA node")
    assert True


def test_free(node, pods):
    before = node.snapshot().shared_pool
    pods.create(claim_pod("p2", 2))
    pods.delete("p2")
    assert node.snapshot().shared_pool == before, "CPUs were not freed"


@pytest.mark.requirement("ACCT-003")
def test_optional(node, record_replay):
    record_replay("pytest test_example.py --seed=" + "7" * 300)
    assert False, "optional behaviour missing: " + "the rule, whole " * 40 + "END-OF-RULE"
"""


def manifest(name: str = "fake-driver", capabilities=("exclusive",), bug: str = "", extra: str = "") -> str:
    env = f"env: {{FAKE_BUG: {bug}}}\n" if bug else ""
    return (f"name: {name}\nprotocol: cci/v1alpha1\ncapabilities: {json.dumps(list(capabilities))}\n{env}"
            f"local:\n  command: [\"{{python}}\", \"-c\", \"pass\"]\n{extra}")


def write_suite(root: Path, tests: str = TESTS, catalog: str = CATALOG) -> Path:
    """The example suite in ``root``: requirements.yaml, conftest.py, test_example.py, drivers/{good,leak,...}
    (the folder names a fake_backend defect)."""
    (root / "requirements.yaml").write_text(catalog)
    (root / "conftest.py").write_text(CONFTEST)
    (root / "test_example.py").write_text(textwrap.dedent(tests))
    drivers = {"good": manifest(), "leak": manifest(bug="leak"), "nostart": manifest(bug="start"),
               "siblings": manifest(capabilities=("exclusive", "core-siblings")),
               "nopending": manifest(bug="no-pending")}
    for folder, text in drivers.items():
        (root / "drivers" / folder).mkdir(parents=True, exist_ok=True)
        (root / "drivers" / folder / "driver.yaml").write_text(text)
    return root


def plugin_args(root: Path, driver: str = "good", report: str = "out") -> list[str]:
    args = ["-p", "no:cacheprovider", "--cci-backend", "fake", "--cci-driver", str(root / "drivers" / driver),
            "--cci-catalog", str(root / "requirements.yaml"), "--cci-report-dir", str(root / report)]
    for name in TOPOLOGIES:
        args += ["--cci-topology", name]
    return args


def statuses(report: dict) -> dict[str, str]:
    return {r["id"]: r["status"] for r in report["requirements"]}
