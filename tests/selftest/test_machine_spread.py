"""`-n` on a backend that builds machines: each xdist worker runs whole machines; the report merges their facts."""

from __future__ import annotations

import json

import pytest
from example_suite import CATALOG, TOPOLOGIES, plugin_args, write_suite

pytest_plugins = ["pytester"]

TESTS = """\
import os
import pytest


@pytest.mark.requirement("CLAIM-001")
@pytest.mark.parametrize("n", range(4))
def test_where(node, topology, n):
    with open(os.environ["CCI_WHERE_LOG"], "a") as fh:
        fh.write(f"{topology.name} {os.getpid()}\\n")
"""


def test_each_worker_runs_whole_machines_and_the_report_merges_their_facts(pytester, monkeypatch):
    where = pytester.path / "where.log"
    monkeypatch.setenv("CCI_WHERE_LOG", str(where))
    # under the harness's own `pytest -n 2` this test runs in a worker: its controller must not inherit the name
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    root = write_suite(pytester.path, tests=TESTS)
    args = [a if a != "fake" else "fake-spread" for a in plugin_args(root)]
    result = pytester.runpytest_subprocess(*args, "-n", "2", "--dist", "loadscope")
    result.assert_outcomes(passed=4 * len(TOPOLOGIES))
    pids: dict[str, set[str]] = {}
    finished: dict[str, str] = {}
    for line in where.read_text().splitlines():
        if line.startswith("finish "):
            _, pid, role = line.split()
            finished[pid] = role
            continue
        machine, pid = line.split()
        pids.setdefault(machine, set()).add(pid)
    # every worker released what it built (kind: its clusters), and so did the controller (kind: what a killed
    # worker could not), each once
    assert sorted(finished.values()) == ["controller", "gw0", "gw1"], finished
    assert set(pids) == set(TOPOLOGIES)
    assert all(len(p) == 1 for p in pids.values()), f"a machine's tests ran in several processes: {pids}"
    assert len(set().union(*pids.values())) == 2, f"the two machines ran in one process: {pids}"
    report = json.loads((root / "out" / "report.json").read_text())
    assert report["errors"] == []  # report.schema.json takes the merged facts (a schema error is a run error)
    facts = report["run"]["backend_facts"]
    assert facts["workers"] == {m: next(iter(p)) for m, p in pids.items()}
    assert sorted(facts["clusters"]) == sorted(set().union(*pids.values()))


@pytest.mark.parametrize(("nodeid", "machine"), [
    ("suites/test_a.py::test_x[laptop-1s4c-smt2]", "laptop-1s4c-smt2"),
    ("suites/test_a.py::test_x[server-2s8c-smt2-intel-not an object]", "server-2s8c-smt2-intel"),
    ("suites/test_a.py::test_x[server-2s8c-smt2]", "server-2s8c-smt2"),  # a name that starts another's
    ("suites/test_a.py::test_x[server-2s8c-smt2-x]", "server-2s8c-smt2"),
    ("suites/test_a.py::test_x[other]", None),
    ("suites/test_a.py::test_x", None),
])
def test_a_test_id_names_its_machine(nodeid, machine):
    from cci_conformance.certify.machine_scheduling import machine_of

    assert machine_of(nodeid, ("laptop-1s4c-smt2", "server-2s8c-smt2", "server-2s8c-smt2-intel")) == machine


def test_facts_of_several_processes_merge_without_losing_any():
    from cci_conformance.certify.run_report import merge_facts

    a = {"node_image": "img", "clusters": ["c1"], "workers": {"m1": "c1-worker"}, "driver_image": {"origin": "x"}}
    b = {"node_image": "img", "clusters": ["c2"], "workers": {"m2": "c2-worker"}, "driver_image": {"origin": "x"}}
    assert merge_facts([{}, a, b]) == {"node_image": "img", "clusters": ["c1", "c2"],
                                       "workers": {"m1": "c1-worker", "m2": "c2-worker"},
                                       "driver_image": {"origin": "x"}}
    # a machine in two processes' clusters (LAT-004's base beside another machine) keeps both nodes
    c = {"node_image": "img", "clusters": ["c3"], "workers": {"m1": "c3-worker2"}}
    assert merge_facts([a, b, c])["workers"] == {"m1": ["c1-worker", "c3-worker2"], "m2": "c2-worker"}


def test_a_driver_that_never_registers_stops_a_run_spread_over_workers_with_one_message(pytester, monkeypatch):
    """No startup probe runs in the controller of a spread run (kind: it would boot a cluster of its own): the
    first worker whose driver does not come up stops the run, REG-001 fails once, everything else is untested."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    catalog = CATALOG + ('  - {id: REG-001, area: claims, text: "Register MUST happen.", source: "KEP-3675 l.7",\n'
                         '     capability: null, required: true, tests: []}\n')
    root = write_suite(pytester.path, catalog=catalog)
    args = [a if a != "fake" else "fake-spread" for a in plugin_args(root, driver="nostart")]
    result = pytester.runpytest_subprocess(*args, "-n", "2", "--dist", "loadscope")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # a failed requirement, not an interrupted run
    stops = [line for line in result.outlines if line.startswith("[cci] STOPPED")]
    assert len(stops) == 1 and "never registered" in stops[0], result.outlines[-30:]
    report = json.loads((root / "out" / "report.json").read_text())
    statuses = {r["id"]: r["status"] for r in report["requirements"]}
    assert statuses.pop("REG-001") == "fail"
    assert set(statuses.values()) == {"untested"}
    assert report["run"]["stopped_early"] and report["run"]["interrupted"] is False and report["run"]["complete"]
    assert [e["kind"] for e in report["errors"]] == ["driver-start"]
    tried = [t for r in report["requirements"] if r["id"] != "REG-001" for t in r["tests"] if t["outcome"] != "missing"]
    # each worker stops after its first test: no test is blamed for the start, and no worker went on
    assert len(tried) <= 2 and all("the run stopped early" in t["reason"] for t in tried), tried


LONG_LAST_IN_FILE = """\
import os
import pytest


@pytest.mark.requirement("CLAIM-001")
@pytest.mark.parametrize("n", range(3))
def test_short(node, topology, n):
    with open(os.environ["CCI_WHERE_LOG"], "a") as fh:
        fh.write(f"{os.environ['PYTEST_XDIST_WORKER']} short {topology.name}\\n")


@pytest.mark.requirement("CLAIM-001")
@pytest.mark.long
def test_long(node, topology):
    with open(os.environ["CCI_WHERE_LOG"], "a") as fh:
        fh.write(f"{os.environ['PYTEST_XDIST_WORKER']} long {topology.name}\\n")
"""


def test_a_run_spread_by_module_starts_each_workers_long_tests_first(pytester, monkeypatch):
    """xdist sets a worker's own --dist to "no": the controller must tell its workers that the run spreads by
    module, or a machine's ACCT-010 runs last and one worker idles while the other finishes it (seen: 16 s of an
    80 s default run)."""
    where = pytester.path / "where.log"
    monkeypatch.setenv("CCI_WHERE_LOG", str(where))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    root = write_suite(pytester.path, tests=LONG_LAST_IN_FILE)
    result = pytester.runpytest_subprocess(*plugin_args(root), "-n", "2", "--dist", "loadscope")
    result.assert_outcomes(passed=4 * len(TOPOLOGIES))
    first: dict[str, str] = {}
    for line in where.read_text().splitlines():
        worker, kind, _ = line.split()
        first.setdefault(worker, kind)
    assert first == {"gw0": "long", "gw1": "long"}, where.read_text()
