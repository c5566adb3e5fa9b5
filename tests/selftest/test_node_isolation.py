"""A shared node that a test restarted or left holding CPUs is replaced, so the damage is never the next test's."""

from __future__ import annotations

import json

import pytest
from example_suite import plugin_args, write_suite

pytest_plugins = ["pytester"]

# Each "damage" test leaves the shared node changed in one way the old check (containers and
# registration only) did not see; the test after it must get a node as new.
TESTS = """\
import pytest
from cci_conformance.node.api import ClaimRef, ContainerSpec, PodSpec


def claim_pod(uid, n):
    return PodSpec("default", uid, uid, (ContainerSpec("c", claim="cl"),),
                   (ClaimRef("cl", "u-" + uid, {"cores": [str(n)], "cpu attributes": [["EXCLUSIVE"]]}),))


@pytest.mark.requirement("CLAIM-001")
def test_1_restarts_the_node(node):
    node.restart_node()


@pytest.mark.requirement("CLAIM-009")
def test_2_after_a_node_restart(node):
    assert node.snapshot().node_generation == 0, "got the node the previous test restarted"


@pytest.mark.requirement("CLAIM-001")
def test_3_restarts_the_driver(node):
    node.restart_driver()


@pytest.mark.requirement("CLAIM-009")
def test_4_after_a_driver_restart(node):
    assert node.snapshot().registrations == 1, "got the node whose driver the previous test restarted"


@pytest.mark.requirement("CLAIM-001")
def test_5_leaves_a_grant(node):
    assert node.create_pod(claim_pod("left", 2)).admitted  # not through `pods`: nothing deletes it


@pytest.mark.requirement("CLAIM-009")
def test_6_after_a_leftover_grant(node):
    assert node.snapshot().exclusive == {}, "got the node the previous test left CPUs held on"
"""


def test_a_restarted_or_dirty_shared_node_is_replaced_before_the_next_test(pytester, monkeypatch):
    monkeypatch.setenv("CCI_FAKE_LOG", str(pytester.path / "sessions.log"))
    root = write_suite(pytester.path, tests=TESTS)
    args = [a for a in plugin_args(root) if a != "server-2s8c-smt2-intel"]
    args = [a for i, a in enumerate(args) if not (a == "--cci-topology" and i + 1 == len(args))]
    result = pytester.runpytest_inprocess(*args)
    result.assert_outcomes(passed=6)
    report = json.loads((root / "out" / "report.json").read_text())
    assert report["run"]["topologies"] == [{"name": "laptop-1s4c-smt2", "cpus": 8, "numa_nodes": 1}]
    opened = [line for line in (root / "sessions.log").read_text().splitlines() if line.startswith("open")]
    assert len(opened) == 4, "one node to start with, and one more after each damage"


@pytest.mark.parametrize("damage", ["restart_node", "restart_driver"])
def test_the_marker_gives_a_destructive_test_a_node_of_its_own(pytester, monkeypatch, damage):
    monkeypatch.setenv("CCI_FAKE_LOG", str(pytester.path / "sessions.log"))
    tests = ("import pytest\n\n\n@pytest.mark.requirement('CLAIM-001')\n@pytest.mark.fresh_node\n"
             f"def test_damage(node):\n    node.{damage}()\n\n\n@pytest.mark.requirement('CLAIM-009')\n"
             "def test_after(node):\n    assert node.snapshot().node_generation == 0\n"
             "    assert node.snapshot().registrations == 1\n")
    root = write_suite(pytester.path, tests=tests)
    pytester.runpytest_inprocess(*plugin_args(root)).assert_outcomes(passed=4)


def test_a_node_whose_snapshot_cannot_be_made_is_never_taken_as_clean(pytester, monkeypatch):
    """A snapshot without a field (fake_backend FAKE_BUG=no-pending, after a pod) is no clean bill of health:
    the shared node is replaced, not handed on because nothing could be read."""
    monkeypatch.setenv("CCI_FAKE_LOG", str(pytester.path / "sessions.log"))
    tests = ("import pytest\nfrom cci_conformance.node.api import ClaimRef, ContainerSpec, PodSpec\n\n\n"
             "@pytest.mark.requirement('CLAIM-001')\ndef test_1_admits(node):\n"
             "    pod = PodSpec('default', 'p', 'p', (ContainerSpec('c'),))\n"
             "    assert node.create_pod(pod).admitted  # from now on its snapshots lack 'pending'\n\n\n"
             "@pytest.mark.requirement('CLAIM-009')\ndef test_2_reads_the_node(node):\n"
             "    assert node.snapshot().pending == ()\n")
    root = write_suite(pytester.path, tests=tests)
    args = plugin_args(root, driver="nopending")
    args = [a for i, a in enumerate(args) if a != "server-2s8c-smt2-intel" and
            not (a == "--cci-topology" and i + 1 < len(args) and args[i + 1] == "server-2s8c-smt2-intel")]
    pytester.runpytest_inprocess(*args).assert_outcomes(passed=2)
    opened = [line for line in (root / "sessions.log").read_text().splitlines() if line.startswith("open")]
    assert len(opened) == 2, "the node whose snapshot failed was handed to the next test"
