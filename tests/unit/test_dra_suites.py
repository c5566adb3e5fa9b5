"""The DRA suites against the in-process node model: a correct node passes, each broken rule fails its requirement."""

from __future__ import annotations

import json

import pytest

from cci_conformance import waiting
from cci_conformance.certify import measuring
from cci_conformance.dra.fake import FakeDraSession
from cci_conformance.dra.suite import OPENER
from cci_conformance.paths import PROJECT_ROOT, SUITES_DIR

pytest_plugins = ["pytester"]
DRIVER = PROJECT_ROOT / "drivers_under_test" / "dra-driver-cpu"
CATALOG = SUITES_DIR / "dra" / "requirements.yaml"
TOPOLOGIES = ("laptop-1s4c-smt2", "server-2s8c-smt2-intel")
ALL = {"CLAIM-601", "CLAIM-602", "CLAIM-603", "CLAIM-604", "CLAIM-605", "CLAIM-606", "ACCT-601", "ACCT-602", "ACCT-603",
       "ROBUST-601", "RESTART-601", "RESTART-602", "RESTART-603", "RESTART-604", "RESTART-605", "REG-601", "LAT-601"}


class VirtualClock:
    """The clock of ``waiting`` while the fake node runs: a sleep advances it instead of passing.

    The fake changes only when a test acts, never while one waits, so a wait for something it will never do
    (a fault's leaked claim) polls as often as on a real node and times out without the 60 s of wall time.
    """

    def __init__(self):
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(autouse=True)
def _fast_inner_runs(monkeypatch, tmp_path):
    monkeypatch.setattr(waiting, "time", VirtualClock())
    # LAT-601 holds the host's latency lock; on the virtual clock a wait for another process's hold (the
    # harness's own tests measure beside these) would time out at once: the inner runs get a lock of their own
    monkeypatch.setattr(measuring, "LOCK_FILE", tmp_path / "latency.lock")
    # the inner runs load only the harness's plugin: every other installed one would be imported (and its
    # asserts rewritten, with no bytecode cache when PYTHONDONTWRITEBYTECODE is set) once per run
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


class FakeOpener:
    """Puts the fake node behind the suites (a run never can: only this stash key reaches it)."""

    def __init__(self, faults=frozenset(), features=None, host_load_per_cpu=None):
        self.faults, self.features, self.opened = frozenset(faults), features, []
        self.host_load_per_cpu = host_load_per_cpu

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config):
        config.stash[OPENER] = self.open

    def open(self, config):
        session = FakeDraSession(config.topology, config.profile, self.faults,
                                 host_load_per_cpu=self.host_load_per_cpu, device_mode=config.device_mode)
        if self.features is not None:
            session.features = frozenset(self.features)
        # what a kind session reports, in report.json's shape (run.backend_facts)
        session.facts = {"node_image": "img", "clusters": [f"c{len(self.opened)}"],
                         "driver_image": {"reference": "dra:x", "origin": "go build",
                                          "archive_sha256": "sha256:" + "0" * 64}}
        self.opened.append(session)
        return session


def run(pytester, opener: FakeOpener, topologies: tuple[str, ...] = TOPOLOGIES, mode: str = "individual") -> dict:
    # importlib: suites/dra/test_latency.py and suites/test_latency.py share a basename, and the CCI one may
    # already be imported in this process (the outer run's modules stay for the inner run)
    args = [str(SUITES_DIR / "dra"), "-p", "cci_conformance.plugin", "-p", "no:cacheprovider",
            "--import-mode=importlib",
            "--cci-driver", str(DRIVER), "--cci-backend", "kind",
            "--cci-catalog", str(CATALOG), "--cci-report-dir", str(pytester.path / "out"),
            "--dra-device-mode", mode, *[a for t in topologies for a in ("--cci-topology", t)]]
    pytester.runpytest_inprocess(*args, plugins=[opener])
    return json.loads((pytester.path / "out" / "report.json").read_text())


def statuses(report: dict) -> dict[str, str]:
    return {r["id"]: r["status"] for r in report["requirements"]}


def test_a_correct_node_passes_every_requirement_with_one_closed_session_per_machine(pytester):
    opener = FakeOpener()
    report = run(pytester, opener)
    assert statuses(report) == dict.fromkeys(ALL, "pass"), statuses(report)
    assert sorted((s.topology.name, s.profile.name) for s in opener.opened) == \
        sorted((t, p) for t in TOPOLOGIES for p in ("none", "static-reserved"))
    assert all(not s._pods for s in opener.opened)
    facts = report["run"]["backend_facts"]
    assert facts["kubernetes"] == "v1.37.2"  # the release the nodes ran, by default
    assert facts["clusters"] == [f"c{n}" for n in range(len(opener.opened))]  # every session's, not the first's
    assert report["errors"] == []  # the report, facts included, is what report.schema.json says
    lat = next(r for r in report["requirements"] if r["id"] == "LAT-601")
    names = {(f["name"], f.get("topology")) for f in lat["figures"]}
    assert {(n, t) for n in ("node_prepare_p99_le", "claimed_pod_start_p99", "node_prepare_calls")
            for t in TOPOLOGIES} <= names, names


# each fault of the node model and the requirements that must fail for it, in individual mode
FAULTS = {
    "split-cores": {"CLAIM-603"},
    "ignore-selector": {"CLAIM-604"},
    # the rest reads the allocation it got, which is consistent; but a pod claiming every CPU left now runs (on
    # one CPU fewer a claim), which ACCT-602 refuses
    "wrong-count": {"CLAIM-601", "CLAIM-603", "ACCT-602"},
    "shared-overlaps": {"ACCT-601", "RESTART-601", "RESTART-603", "RESTART-604", "RESTART-605"},
    "starve-shared": {"ACCT-601", "RESTART-601", "RESTART-602", "RESTART-603", "RESTART-604", "ROBUST-601"},
    "share-claim-across-pods": {"CLAIM-606"},
    # a stopped driver starts afresh too; the CPUs it forgot stay in the pool, over the later claim of RESTART-605
    "forget-on-driver-restart": {"RESTART-603", "RESTART-604", "RESTART-605"},
    "reprepare-on-kubelet-restart": {"RESTART-601"},
    # the leaked CPUs stay out of the pool for the rest of the run: the later pool checks see them too
    "leak-on-delete": {"RESTART-602", "RESTART-603", "RESTART-604", "ROBUST-601"},
    "slow-prepare": {"LAT-601"},
    "empty-the-pool": {"ACCT-602"},
    "ignore-static-pins": {"ACCT-603"},
    "release-on-stop": {"RESTART-605"},
    "publish-reserved": set(),  # policy none reserves nothing: REG-601 cannot tell (the static profile can)
    "ignore-opaque-config": {"ROBUST-601"},
    "vague-config-refusal": {"ROBUST-601"},
}


@pytest.mark.parametrize(("fault", "fails"), list(FAULTS.items()))
def test_each_broken_rule_fails_its_requirement(pytester, fault, fails):
    # one machine with two NUMA nodes and SMT-2 has every rule at stake (the correct run takes both)
    report = run(pytester, FakeOpener({fault}), ("server-2s8c-smt2-intel",))
    got = statuses(report)
    assert {r for r, s in got.items() if s == "fail"} == fails, got
    assert {r for r, s in got.items() if s != "fail"} == ALL - fails and set(got.values()) <= {"pass", "fail"}
    failed = [t for r in report["requirements"] for t in r["tests"] if t["outcome"] == "failed"]
    # each failure carries what its node held then (a kind node: logs, journals, the kubelet's state files)
    assert all(any(p.endswith("fake-records.txt") for p in t.get("evidence", [])) for t in failed), failed


def test_a_missing_hook_leaves_its_requirement_untested_never_passed(pytester):
    features = {"kubelet-stop", "checkpoints", "driver-restart", "driver-stop", "container-restart", "metrics"}
    report = run(pytester, FakeOpener(features=features), ("server-2s8c-smt2-intel",))
    got = statuses(report)
    assert got["RESTART-601"] == "untested", got
    assert {r for r, s in got.items() if s == "pass"} == ALL - {"RESTART-601"}
    reason = next(t["reason"] for r in report["requirements"] if r["id"] == "RESTART-601" for t in r["tests"])
    assert "kill -9 the kubelet" in reason


def test_the_run_scratch_dir_is_made_with_the_first_session_and_removed_at_the_end(tmp_path):
    """Every pytest run that loaded the DRA suites used to leave a cci-dra-* dir in /tmp (297 after one day)."""
    from cci_conformance.certify.settings import load_topology
    from cci_conformance.dra import api
    from cci_conformance.dra.suite import Sessions

    opened = []
    def opener(config):
        opened.append(config)
        return FakeDraSession(config.topology, config.profile)
    sessions = Sessions(opener, DRIVER / "driver.yaml", "v1.37.2")
    assert sessions._workdir is None  # loading the suites makes nothing
    sessions.get(load_topology("laptop-1s4c-smt2"), api.POLICY_NONE)
    workdir = sessions._workdir
    assert workdir is not None and workdir.is_dir() and opened[0].workdir.parent == workdir
    sessions.shutdown()
    assert not workdir.exists()


@pytest.mark.parametrize(("fault", "load", "status"), [
    ("slow-prepare", 4.0, "untested"),  # over budget on a host with 4 runnable tasks per CPU: the host's queue
    ("slow-prepare", 1.5, "fail"),  # over budget on a host within the guard: the driver's
    (None, 4.0, "pass"),  # within budget even on the loaded host: a pass stays a pass
])
def test_lat601_over_budget_on_a_loaded_host_is_untested_never_failed_or_passed(pytester, fault, load, status):
    # the kubelet's wall clock on a 2-CPU host running other clusters: a correct driver's LAT-601 failed on kind
    # while another kind test ran beside it (p99 <= 153 ms over 100 calls)
    report = run(pytester, FakeOpener({fault} if fault else (), host_load_per_cpu=load), ("server-2s8c-smt2-intel",))
    lat = next(r for r in report["requirements"] if r["id"] == "LAT-601")
    assert lat["status"] == status, lat
    assert {"name": "host_load_per_cpu", "value": load} in [
        {k: f[k] for k in ("name", "value")} for f in lat["figures"]], lat["figures"]
    if status == "untested":
        assert "runnable tasks per CPU" in lat["tests"][0]["reason"], lat


def test_a_correct_node_in_grouped_mode_passes_every_requirement(pytester):
    opener = FakeOpener()
    report = run(pytester, opener, mode="grouped")
    assert statuses(report) == dict.fromkeys(ALL, "pass"), statuses(report)
    assert {s.device_mode for s in opener.opened} == {"grouped"}
    assert report["run"]["backend_facts"]["device_mode"] == "grouped"
    assert report["errors"] == []


# grouped mode: the same, but a short count fails every test that reads a grouped claim's CPUs off its containers
GROUPED_FAULTS = {**FAULTS, "wrong-count": {
    "CLAIM-601", "CLAIM-602", "CLAIM-603", "CLAIM-604", "CLAIM-605", "CLAIM-606", "ACCT-601", "ACCT-602",
    "RESTART-601", "RESTART-602", "RESTART-603", "RESTART-604", "RESTART-605"}}


@pytest.mark.parametrize(("fault", "fails"), list(GROUPED_FAULTS.items()))
def test_each_broken_rule_fails_its_requirement_in_grouped_mode(pytester, fault, fails):
    report = run(pytester, FakeOpener({fault}), ("server-2s8c-smt2-intel",), mode="grouped")
    got = statuses(report)
    assert {r for r, s in got.items() if s == "fail"} == fails, got
    assert {r for r, s in got.items() if s != "fail"} == ALL - fails and set(got.values()) <= {"pass", "fail"}


def test_a_machine_too_small_for_a_test_makes_it_not_applicable_with_the_count_never_failed(pytester, tmp_path):
    """A real node of 2 CPUs (docs/spec-dra.md S5.4): a test that holds two claims and a shared CPU cannot be run there,
    and a correct driver's refusal must not read as its failure. Not applicable on the machine; with no other
    machine in the run, untested (never passed), with the count in the reason."""
    import yaml

    spec = tmp_path / "tiny-2cpu.yaml"
    spec.write_text(yaml.safe_dump({"description": "two CPUs, one thread a core", "threads_per_core": 1,
                                    "packages": [{"nodes": [{"cores": 2, "memory": "4G"}]}]}))
    report = run(pytester, FakeOpener(), (str(spec),))
    got = statuses(report)
    too_small = {"CLAIM-602", "ACCT-601", "ACCT-603", "RESTART-601", "RESTART-603", "RESTART-604"}
    other_shape = {"CLAIM-603", "CLAIM-604"}  # one thread a core; one NUMA node
    assert {r for r, s in got.items() if s == "untested"} == too_small | other_shape, got
    assert {r for r, s in got.items() if s == "pass"} == ALL - too_small - other_shape, got
    reason = next(r["reason"] for r in report["requirements"] if r["id"] == "ACCT-601")
    assert "offers 2 CPUs" in reason and "needs 3" in reason, reason
