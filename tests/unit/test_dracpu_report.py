"""The dra-cpu suites through the run's reporter: findings become report.json, junit.xml, report.html (no cluster)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from cci_conformance.certify.cli import DRA_TOPOLOGIES
from cci_conformance.certify.report import validation_errors
from cci_conformance.kind import dracpu_certify, dracpu_latency, dracpu_suite
from cci_conformance.kind.dracpu_suite import ClusterSpec
from cci_conformance.paths import PROJECT_ROOT, SUITES_DIR

pytest_plugins = ["pytester"]
DRIVER = PROJECT_ROOT / "drivers_under_test" / "dra-driver-cpu"
DIGEST = {"algorithm": "sha256", "of": "image", "value": "ab" * 32, "files": 1}
# v0.2.0's findings per requirement on a policy-none individual cluster (docs/dra-cpu.md "Findings").
V020 = {"CLAIM-501": "pass", "CLAIM-502": "pass", "CLAIM-503": "pass", "CLAIM-504": "pass", "ACCT-501": "fail",
        "ACCT-502": "fail", "RESTART-501": "fail", "RESTART-502": "fail", "RESTART-503": "fail",
        "ROBUST-501": "pass", "LAT-501": "pass", "REG-501": "pass"}
# ... and in the report: a fail anywhere fails.
V020_REPORT = {**V020, "CLAIM-502": "fail", "ROBUST-502": "fail"}
PREPARE = 'driver_name="dra.cpu",grpc_status_code="{code}",method_name="/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/' \
    'NodePrepareResources"'


def grpc_lines(within: int, over: int, mean: float = 0.02, code: str = "OK") -> list[str]:
    """The kubelet's dra_grpc_operations_duration_seconds for NodePrepareResources (its 1.34 buckets start at 0.1)."""
    labels, n = PREPARE.format(code=code), within + over
    name = dracpu_latency.GRPC_METRIC
    return [f'{name}_bucket{{{labels},le="0.1"}} {within}', f'{name}_bucket{{{labels},le="0.15355"}} {n}',
            f'{name}_bucket{{{labels},le="+Inf"}} {n}', f"{name}_sum{{{labels}}} {mean * n}",
            f"{name}_count{{{labels}}} {n}"]


class MetricSession:
    """What preparation_latency reads of a DraCpuSession: the kubelet's metrics and the steady pods' spans."""

    def __init__(self, lines: list[str]):
        self.lines, self.start_spans = lines, {"st-core": 1.0, "st-odd": 2.0}

    def kubelet_metric(self, name: str) -> list[str]:
        return [line for line in self.lines if line.startswith(name)]


@pytest.fixture
def quiet_host(monkeypatch):
    """A host whose run queue does not excuse a slow call (this one's may be long: other sessions' clusters)."""
    monkeypatch.setattr(dracpu_latency, "host_load_per_cpu", lambda: 0.5)


def lat501(lines: list[str]) -> dict:
    """LAT-501's finding from kubelet metric text, by the scenario the kind run uses."""
    [finding] = dracpu_latency.preparation_latency(MetricSession(lines))
    return finding.as_dict()


def fake_findings(spec: ClusterSpec) -> list[dict]:
    if spec.policy == dracpu_suite.STATIC_POLICY:
        wanted = {"REG-501": "pass", "ROBUST-501": "pass", "ROBUST-502": "fail"}
    else:
        wanted = dict(V020, **({"CLAIM-502": "fail"} if spec.mode == dracpu_suite.GROUPED else {}))
    return [lat501(grpc_lines(9, 0)) if rid == "LAT-501" else
            {"requirement": rid, "verdict": v, "scenario": "fake", "evidence": [f"{rid} on {spec.id}: {v}"],
             "figures": []} for rid, v in wanted.items()]


def fake_run_cluster(spec: ClusterSpec, version, name, logs_dir, *, errors=()) -> dict:
    ids = [r.id for r in dracpu_suite.load_catalog(dracpu_suite.CATALOG).requirements]
    findings = [f for f in fake_findings(spec) if f["requirement"] not in {r for r, _ in errors}]
    run = {"topology": spec.topology, "cluster": spec.id, "findings": findings,
           "errors": [e for _, e in errors]}
    run["verdicts"] = dracpu_certify.verdicts(run, spec.measures(ids))
    if logs_dir is not None:
        logs_dir.mkdir(parents=True, exist_ok=True)
        (logs_dir / dracpu_suite.FINDINGS_FILE).write_text(json.dumps(run))
    return run


@pytest.fixture
def fake_kind(monkeypatch):
    def build(settings):
        settings.extra["driver_digest"] = DIGEST
        return type("Built", (), {"version": settings.manifest.version})()

    monkeypatch.setattr(dracpu_suite, "build_for_run", build)
    monkeypatch.setattr(dracpu_suite, "run_cluster", fake_run_cluster)


def run_suite(pytester, *extra: str) -> tuple[dict, object]:
    args = [str(SUITES_DIR / "dra_cpu"), "-p", "no:cacheprovider", "--cci-driver", str(DRIVER), "--cci-backend",
            "kind", "--cci-catalog", str(dracpu_suite.CATALOG), "--cci-report-dir", str(pytester.path / "out"),
            *[a for t in DRA_TOPOLOGIES for a in ("--cci-topology", t)], *extra]
    result = pytester.runpytest_inprocess(*args)
    return json.loads((pytester.path / "out" / "report.json").read_text()), result


def statuses(report: dict) -> dict[str, str]:
    return {r["id"]: r["status"] for r in report["requirements"]}


def test_findings_become_the_standard_report(pytester, fake_kind):
    report, _ = run_suite(pytester)
    assert validation_errors(report) == []
    assert statuses(report) == V020_REPORT
    assert report["verdict"]["state"] == "not-certified" and report["verdict"]["exit_code"] == 1
    assert report["verdict"]["untested_required"] == []
    run = report["run"]
    assert run["backend"] == "kind" and [t["name"] for t in run["topologies"]] == list(DRA_TOPOLOGIES)
    assert run["driver"]["name"] == "dra-driver-cpu" and run["driver"]["version"] == "v0.2.0"
    assert run["driver"]["digest"] == DIGEST
    # Four clusters: both topologies individual, the two-NUMA one grouped, the first one static.
    by_req = {r["id"]: r for r in report["requirements"]}
    params = sorted(t["nodeid"].split("[")[1].rstrip("]") for t in by_req["CLAIM-502"]["tests"])
    assert params == ["laptop-1s4c-smt2", "server-2s8c-smt2-intel", "server-2s8c-smt2-intel-grouped"]
    assert [t["nodeid"].split("[")[1] for t in by_req["ROBUST-502"]["tests"]] == ["laptop-1s4c-smt2-static]"]
    assert len(by_req["REG-501"]["tests"]) == 4
    failed = next(t for t in by_req["CLAIM-502"]["tests"] if t["outcome"] == "failed")
    assert "grouped" in failed["nodeid"] and "CLAIM-502 on server-2s8c-smt2-intel-grouped: fail" in failed["reason"]
    assert failed["evidence"][0] == "sessions/server-2s8c-smt2-intel-grouped/findings.json"
    assert (pytester.path / "out" / failed["evidence"][0]).is_file()
    assert {f["name"] for f in by_req["LAT-501"]["figures"]} >= {"prepare_calls", "prepare_calls_over_budget",
                                                                 "prepare_budget_max", "scheduled_to_ready_max"}
    # The same reporter's other files: JUnit (one testcase per requirement and cluster) and HTML.
    cases = ET.parse(pytester.path / "out" / "junit.xml").getroot().iter("testcase")
    assert sum(1 for _ in cases) == sum(len(r["tests"]) for r in report["requirements"])
    assert "dra-driver-cpu" in (pytester.path / "out" / "report.html").read_text()


def test_options_choose_the_extra_clusters(pytester, fake_kind):
    report, _ = run_suite(pytester, "--dra-grouped-topology", "none", "--dra-static-topology", "none")
    got = statuses(report)
    assert got["CLAIM-502"] == "pass"  # the grouped cluster, the only one where it fails, did not run
    assert got["ROBUST-502"] == "untested"  # no static cluster: never a pass


def test_a_scenario_that_raised_leaves_its_requirement_untested(pytester, fake_kind, monkeypatch):
    broken = lambda spec, *a: fake_run_cluster(spec, *a, errors=[("CLAIM-501", "steady: WaitTimeout: x")])  # noqa: E731
    monkeypatch.setattr(dracpu_suite, "run_cluster", broken)
    report, _ = run_suite(pytester)
    assert statuses(report)["CLAIM-501"] == "untested"


def test_a_cluster_that_never_came_up_passes_nothing(pytester, fake_kind, monkeypatch):
    def down(*args):
        raise RuntimeError("kind create cluster failed")

    monkeypatch.setattr(dracpu_suite, "run_cluster", down)
    report, _ = run_suite(pytester)
    # Every test errors in its setup, which the reporter counts as a failure, as for a CCI suite.
    assert set(statuses(report).values()) == {"fail"}
    tests = [t for r in report["requirements"] for t in r["tests"]]
    assert {t["outcome"] for t in tests} == {"error"} and "kind create cluster failed" in tests[0]["reason"]
    assert report["verdict"]["certified"] is False


def test_a_cci_run_never_collects_the_dra_suites(pytester):
    result = pytester.runpytest_inprocess(str(SUITES_DIR), "--co", "-q", "-p", "no:cacheprovider")
    assert "dra_cpu" not in result.stdout.str() and "test_claims.py" in result.stdout.str()


def test_outcome_never_passes_what_was_not_judged():
    run = {"topology": "t", "findings": [], "verdicts": {
        "A": {"verdict": "pass", "scenario": "s", "evidence": ["ok"]},
        "B": {"verdict": "fail", "scenario": "s", "evidence": ["x", "y"]},
        "C": {"verdict": "inconclusive", "scenario": "s", "evidence": ["measured"]},
        "D": {"verdict": "not run", "scenario": "", "evidence": ["raised"]}}}
    got = {rid: dracpu_suite.outcome(run, rid).status for rid in "ABCDE"}
    assert got == {"A": "passed", "B": "failed", "C": "skipped", "D": "skipped", "E": "skipped"}
    assert dracpu_suite.outcome(run, "B").message == "t, scenario s: x; y"


def test_cluster_specs_defaults():
    specs = dracpu_suite.cluster_specs(list(DRA_TOPOLOGIES), None, None)
    assert [s.id for s in specs] == ["laptop-1s4c-smt2", "server-2s8c-smt2-intel", "server-2s8c-smt2-intel-grouped",
                                     "laptop-1s4c-smt2-static"]
    assert specs[-1].measures(["REG-501", "CLAIM-501", "ROBUST-502"]) == ["REG-501", "ROBUST-502"]
    assert specs[0].measures(["REG-501", "CLAIM-501", "ROBUST-502"]) == ["REG-501", "CLAIM-501"]
    assert [s.id for s in dracpu_suite.cluster_specs(["laptop-1s4c-smt2"], None, ["none"])] == ["laptop-1s4c-smt2"]


def test_prepare_figures_read_the_successful_calls():
    metric = ['dra_operations_duration_seconds_sum{is_error="true",operation_name="PrepareResources"} 0.06',
              'dra_operations_duration_seconds_count{is_error="true",operation_name="PrepareResources"} 5',
              'dra_operations_duration_seconds_sum{is_error="false",operation_name="PrepareResources"} 9']
    assert dracpu_latency.pod_prepare_figures(metric) == [
        {"name": "prepare_resources_mean", "value": pytest.approx(0.012), "unit": "s"},
        {"name": "prepare_resources_calls", "value": 5.0, "unit": ""}]


@pytest.mark.parametrize(("lines", "verdict", "said"), [
    (grpc_lines(8, 0), "pass", "all 8 NodePrepareResources calls within the 100 ms budget (mean 20.0 ms)"),
    (grpc_lines(11, 1), "fail", "1 of 12 NodePrepareResources calls took longer than the 100 ms budget "
                                "(the slowest at most 153.55 ms; mean 20.0 ms)"),
    (grpc_lines(7, 0), "inconclusive", "7 successful NodePrepareResources calls"),  # under min_calls: 8
    (grpc_lines(2, 0) + grpc_lines(0, 30, code="DeadlineExceeded"), "inconclusive", "2 successful"),
    ([], "inconclusive", "0 successful"),  # no metric at all (the node proxy failed): never a pass
])
def test_lat501_judges_the_slowest_preparation_against_the_budget(quiet_host, lines, verdict, said):
    finding = lat501(lines)
    assert (finding["verdict"], finding["requirement"]) == (verdict, "LAT-501")
    assert said in finding["evidence"][0]


def test_lat501_on_an_oversubscribed_host_a_slow_call_is_not_the_drivers(monkeypatch):
    monkeypatch.setattr(dracpu_latency, "host_load_per_cpu", lambda: 14.2)
    slow, fast = lat501(grpc_lines(8, 3)), lat501(grpc_lines(11, 0))
    assert slow["verdict"] == "inconclusive" and "3 of 11" in slow["evidence"][0]
    assert "14.2 runnable tasks per CPU" in slow["evidence"][0] and "over 2:" in slow["evidence"][0]
    assert fast["verdict"] == "pass"  # within budget even on a loaded host
    assert {"name": "host_load_per_cpu", "value": 14.2, "unit": ""} in slow["figures"]


def test_lat501_budget_between_bucket_boundaries_is_not_rounded():
    budget = dracpu_latency.Budget(max_seconds=0.05, min_calls=1, max_load_per_cpu=2.0)
    verdict, evidence, _ = dracpu_latency.judge(grpc_lines(9, 0), budget)
    assert verdict == "inconclusive" and "no bucket at 50 ms" in evidence[0]


def test_lat501_budget_file_is_checked(tmp_path):
    from cci_conformance.errors import ConfigError

    assert dracpu_latency.load_budget() == dracpu_latency.Budget(0.1, 8, 2.0)
    bad = tmp_path / "latency.yaml"
    bad.write_text("preparation: {max_ms: -1}\nsamples: {min_calls: 8}\nhost: {max_load_per_cpu: 2}\n")
    with pytest.raises(ConfigError, match="preparation.max_ms"):
        dracpu_latency.load_budget(bad)


@pytest.mark.parametrize(("within", "over", "status"), [(9, 0, "pass"), (8, 3, "fail"), (5, 0, "untested")])
def test_lat501_verdict_reaches_the_report(pytester, fake_kind, quiet_host, monkeypatch, within, over, status):
    """Metric text over, under the budget, and too short, through the scenario, suite and reporter."""
    def findings(spec):
        return [lat501(grpc_lines(within, over)) if f["requirement"] == "LAT-501" else f for f in base(spec)]

    base = fake_findings
    monkeypatch.setitem(globals(), "fake_findings", findings)
    report, _ = run_suite(pytester, "--dra-grouped-topology", "none", "--dra-static-topology", "none")
    req = next(r for r in report["requirements"] if r["id"] == "LAT-501")
    assert req["status"] == status
    reasons = " ".join(t["reason"] for t in req["tests"])
    if status == "fail":
        assert "3 of 11 NodePrepareResources calls took longer than the 100 ms budget" in reasons
    if status == "untested":
        assert "5 successful NodePrepareResources calls" in reasons and "at least 8 needed" in reasons
        assert "LAT-501" in report["verdict"]["untested_required"] and report["verdict"]["certified"] is False


def test_a_claim_for_one_numa_node_selects_its_group_devices_and_checks_their_cpus():
    from cci_conformance.kind import dracpu_pods, dracpu_slices
    from cci_conformance.topology import library

    request = dracpu_pods.claim("far", 2, grouped=True, numa_node=1)["spec"]["devices"]["requests"][0]["exactly"]
    assert request["selectors"] == [{"cel": {"expression": 'device.attributes["dra.cpu"].numaNodeID == 1'}}]
    assert request["capacity"] == {"requests": {"dra.cpu/cpu": "2"}} and request["count"] == 1
    assert "selectors" not in dracpu_pods.claim("any", 2, grouped=True)["spec"]["devices"]["requests"][0]["exactly"]
    topology = library.resolve("server-2s8c-smt2-intel")
    published = {"cpudevgroup0": {"dra.cpu/numaNodeID": 0}, "cpudevgroup1": {"dra.cpu/numaNodeID": 1}}
    claim = {"status": {"allocation": {"devices": {"results": [{"driver": "dra.cpu", "device": "cpudevgroup1"}]}}}}
    nodes, cpus = dracpu_slices.group_node_cpus(claim, published, topology)
    assert nodes == {1} and cpus == topology.node_cpus[1]


def test_the_certify_command_parses_its_run_arguments_with_runs_own_parser():
    """Every option `run` reads has its default (a hand-built Namespace missed --stateful-examples and made the
    kind e2e fail with AttributeError), and the command keeps the dra-cpu suites on the CCI node image."""
    from cci_conformance.certify import cli as certify_cli

    args = type("Args", (), {"topology": ["laptop-1s4c-smt2"], "grouped_topology": ["none"],
                             "static_topology": ["none"], "report_dir": "out", "timeout": 1800.0})()
    namespace = dracpu_certify.run_args(args)
    settings, suites = certify_cli._settings(namespace)
    assert suites == SUITES_DIR / "dra_cpu" and settings.backend == "kind" and settings.kubernetes is None
    assert settings.topologies == ("laptop-1s4c-smt2",) and namespace.workers == 0
    assert namespace.pytest_args == ["--dra-grouped-topology=none", "--dra-static-topology=none"]
    defaults = type("Args", (), {"topology": None, "grouped_topology": None, "static_topology": None,
                                 "report_dir": None, "timeout": 3600.0})()
    assert certify_cli._settings(dracpu_certify.run_args(defaults))[0].topologies == DRA_TOPOLOGIES
