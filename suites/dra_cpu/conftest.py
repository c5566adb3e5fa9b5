"""The dra-cpu suites' clusters: options, one parameter per kind cluster, one scenario run per cluster.

Run through `cci-conformance run --driver drivers_under_test/dra-driver-cpu` (the report bundle of
every run) or `pytest suites/dra_cpu --cci-driver ... --cci-backend kind --cci-report-dir DIR`.
Each cluster is created, used by its scenarios and deleted before the next (one at a time).
"""

from __future__ import annotations

import pytest

from cci_conformance.certify import bundle
from cci_conformance.certify.collector import PROP_EVIDENCE, PROP_FIGURE
from cci_conformance.certify.stash import SETTINGS
from cci_conformance.kind import dracpu_suite

RUNS = pytest.StashKey[dict]()  # cluster id -> its run dict, or the exception its setup raised
SPECS = pytest.StashKey[list]()  # the run's clusters (dracpu_suite.ClusterSpec), in run order


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dra-cpu", "dra-cpu suites (kind clusters besides one per --cci-topology)")
    group.addoption("--dra-grouped-topology", action="append", default=None, metavar="NAME",
                    help="also a cluster with the driver in grouped mode (repeatable; default: the run's first "
                         "topology with more than one NUMA node; none: no such cluster)")
    group.addoption("--dra-static-topology", action="append", default=None, metavar="NAME",
                    help="also a worker with the kubelet's static CPU manager policy, for ROBUST-502 (repeatable; "
                         "default: the run's first topology; none: no such cluster)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "dra_cpu: a dra-cpu requirement judged on kind clusters")
    settings = config.stash[SETTINGS]
    manifest = settings.manifest
    if not manifest.is_dra:
        raise pytest.UsageError(f"the dra-cpu suites certify DRA drivers; {manifest.path} has protocol "
                                f"{manifest.protocol}; fix: --cci-driver drivers_under_test/dra-driver-cpu")
    if settings.backend != "kind":
        raise pytest.UsageError(f"the dra-cpu suites run on kind, not on backend {settings.backend!r}; "
                                "fix: --cci-backend kind")
    specs = dracpu_suite.cluster_specs(list(settings.topologies), config.getoption("dra_grouped_topology"),
                                       config.getoption("dra_static_topology"))
    config.stash[SPECS] = specs
    config.stash[RUNS] = {}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "dra_cluster" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("requirement")
    rid = marker.args[0]
    specs = [s for s in metafunc.config.stash[SPECS] if rid in s.measures([rid])]
    # Session scope groups the tests by cluster; an empty list is pytest's "skipped: empty parameter set",
    # which the report counts as untested, never as a pass.
    metafunc.parametrize("dra_cluster", specs, ids=[s.id for s in specs], scope="session")


@pytest.fixture(scope="session")
def dra_image(pytestconfig):
    """The driver's image, built offline (cached); the report names its manifest digest."""
    return dracpu_suite.build_for_run(pytestconfig.stash[SETTINGS])


@pytest.fixture(scope="session")
def dra_run(dra_cluster, dra_image, pytestconfig) -> dict:
    """The cluster's scenarios, run once: a failed setup is an error of every test on it (untested)."""
    runs = pytestconfig.stash[RUNS]
    if dra_cluster.id not in runs:
        settings = pytestconfig.stash[SETTINGS]
        logs = bundle.sessions_dir(settings.report_dir, dra_cluster.id) if settings.report_dir else None
        try:
            runs[dra_cluster.id] = dracpu_suite.run_cluster(dra_cluster, dra_image.version,
                                                            dracpu_suite.cluster_name(len(runs)), logs)
        except Exception as exc:  # cluster or deployment: every test of this cluster errors with it
            runs[dra_cluster.id] = exc
    run = runs[dra_cluster.id]
    if isinstance(run, Exception):
        raise run
    return run


@pytest.fixture
def dra_judge(dra_run, dra_cluster, request, pytestconfig):
    """``judge(requirement)``: pass, fail with the finding's evidence, or skip when it was not judged."""
    settings = pytestconfig.stash[SETTINGS]

    def judge(requirement: str) -> None:
        for fig in dracpu_suite.figures(dra_run, requirement):
            request.node.user_properties.append((PROP_FIGURE, fig))
        result = dracpu_suite.outcome(dra_run, requirement)
        if result.status == dracpu_suite.FAILED:
            if settings.report_dir is not None:
                folder = bundle.sessions_dir(settings.report_dir, dra_cluster.id)
                request.node.user_properties.append(
                    (PROP_EVIDENCE, [bundle.relative(folder / dracpu_suite.FINDINGS_FILE, settings.report_dir),
                                     bundle.relative(folder, settings.report_dir)]))
            pytest.fail(result.message, pytrace=False)
        if result.status == dracpu_suite.SKIPPED:
            pytest.skip(result.message)
        request.node.user_properties.append(("dra_cpu_evidence", result.message))

    return judge

