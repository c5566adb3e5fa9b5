"""The cci-conformance pytest plugin: the options, fixtures and hooks of a certification run."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

from . import interrupts
from .backends.base import NodeFault
from .certify.catalog import base_test_id
from .certify.collector import PROP_EVIDENCE, PROP_NA, PROP_NODE_FAULT, PROP_REQUIREMENTS
from .certify.outcomes import CAPABILITY_NA_KIND, capability_skip_reason
from .certify.run_plugins import WORKER_FACTS, SigtermInterrupt, StartupProbe, XdistCount, spreads_by_machine
from .certify.sessions import collect_failure_evidence
from .certify.settings import DEFAULT_BACKEND, DEFAULT_NODE_PROFILE, DEFAULT_TOPOLOGIES, RunSettings
from .certify.stash import FAILED, SESSIONS_USED, SETTINGS, suite_facts
from .errors import ConfigError
from .paths import PROJECT_ROOT, REFERENCE_DRIVER_DIR
from .protocol.capabilities import KNOWN_CAPABILITIES

FIXTURES_PACKAGE = "cci_conformance_fixtures"  # a private name: "fixtures" is also a PyPI package
FIXTURES_DIR = PROJECT_ROOT / "fixtures"
MARKERS = (
    "requirement(*ids): the catalog requirement(s) this conformance test proves",
    "needs(*capabilities): driver capabilities the test needs (skipped with the reason when undeclared)",
    "fresh_node: give this test a node session of its own instead of the module's shared one",
    "node_profile(name): run this test's node with profiles/node/<name>.yaml",
    "long: runs for many seconds (ACCT-010's random examples); a run spread over workers starts these first",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("cci-conformance", "CCI driver certification")
    group.addoption("--cci-driver", metavar="DIR|MANIFEST", default=None,
                    help="driver under test: a folder with driver.yaml, or the manifest "
                         f"(default: drivers_under_test/{REFERENCE_DRIVER_DIR.name})")
    group.addoption("--cci-topology", metavar="NAME", action="append", default=None,
                    help=f"machine to certify on, repeatable (default: {' '.join(DEFAULT_TOPOLOGIES)})")
    group.addoption("--cci-profile", metavar="NAME|FILE", default=None,
                    help="latency profile (profiles/latency/NAME.yaml or a file; default: default)")
    group.addoption("--cci-backend", metavar="NAME", default=None, help=f"backend (default: {DEFAULT_BACKEND})")
    group.addoption("--cci-node-profile", metavar="NAME|FILE", default=None,
                    help=f"node profile (profiles/node/NAME.yaml; default: {DEFAULT_NODE_PROFILE})")
    group.addoption("--cci-report-dir", metavar="DIR", default=None,
                    help="write report.json, junit.xml, report.html and the bundle here")
    group.addoption("--cci-catalog", metavar="FILE", default=None,
                    help="requirement catalog (default: suites/requirements.yaml)")
    group.addoption("--cci-stateful-examples", metavar="N", type=int, default=None,
                    help="ACCT-010's random examples per topology (default: the backend's, "
                         "certify/settings.STATEFUL_EXAMPLES; more for a longer exploration)")
    group.addoption("--cci-progress", action="store_true", default=False,
                    help="print one [cci] line per finished test with a running count")


def _settings(config: pytest.Config) -> RunSettings:
    opt = config.getoption
    settings = RunSettings(progress=bool(opt("cci_progress")))
    if opt("cci_driver"):
        settings.driver = Path(opt("cci_driver"))
    if opt("cci_topology"):
        settings.topologies = tuple(opt("cci_topology"))
    for attr, name in (("profile", "cci_profile"), ("backend", "cci_backend"), ("node_profile", "cci_node_profile")):
        if opt(name):
            setattr(settings, attr, opt(name))
    settings.stateful_examples = opt("cci_stateful_examples")
    if opt("cci_report_dir"):
        settings.report_dir = Path(opt("cci_report_dir")).resolve()
    if opt("cci_catalog"):
        settings.catalog_path = Path(opt("cci_catalog")).resolve()
    return settings


def _register_fixtures(config: pytest.Config) -> None:
    if not (FIXTURES_DIR / "__init__.py").is_file():
        return
    package = sys.modules.get(FIXTURES_PACKAGE)
    if package is None:
        spec = importlib.util.spec_from_file_location(FIXTURES_PACKAGE, FIXTURES_DIR / "__init__.py",
                                                      submodule_search_locations=[str(FIXTURES_DIR)])
        package = importlib.util.module_from_spec(spec)
        sys.modules[FIXTURES_PACKAGE] = package
        spec.loader.exec_module(package)
    for name in package.FIXTURE_MODULES:
        module = importlib.import_module(f"{FIXTURES_PACKAGE}.{name}")
        if not config.pluginmanager.is_registered(module):
            config.pluginmanager.register(module, f"cci-fixtures-{name}")


GROWTH_REQUIREMENT = "LAT-004"  # its test measures machines beside the run's (certify/budgets.growth_machines)
LONG_FIRST = "cci_long_first"  # workerinput key: this worker starts its @pytest.mark.long tests first


def _prepare_backend(settings: RunSettings, growth: bool) -> None:
    """Tell the backend every machine the run will ask for: each run topology and, when LAT-004's test runs,
    its growth machines beside it (the kind backend makes one worker per machine when a cluster is created)."""
    from .backends.registry import get_backend
    from .certify.budgets import growth_machines
    from .certify.settings import load_topology

    try:
        backend = get_backend(settings.backend)
        topologies = [load_topology(name) for name in settings.topologies]
    except ConfigError:
        return  # reported by settings.validate() with the field and the fix
    groups = []
    for t in topologies:
        beside = [m for m in growth_machines(t, topologies) if m.name != t.name] if growth else []
        groups.append((t, *beside))
    backend.prepare(tuple(groups))


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _asked_for_certification(config: pytest.Config) -> bool:
    return any(config.getoption(o) for o in ("cci_report_dir", "cci_driver", "cci_topology", "cci_profile",
                                             "cci_backend", "cci_catalog"))


@pytest.hookimpl(tryfirst=True)  # before junitxml reads --junitxml
def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    if interrupts.install():  # in every process that runs tests: the controller and each xdist worker
        interrupts.install_sigint()
        config.pluginmanager.register(SigtermInterrupt(), "cci-sigterm")
    settings = _settings(config)
    config.stash[SETTINGS] = settings
    _register_fixtures(config)
    from .certify.early_stop import StartFailureStop

    if _is_worker(config):
        config.pluginmanager.register(StartFailureStop(config), "cci-start-failure-stop")
        # Each test holds the latency lock shared, so a measurement runs beside none of another worker's tests, on
        # every backend (docs/spec.md 4.5): the CCI fills on kind once ran beside the other worker's pod starts.
        if _asked_for_certification(config):
            from .certify.measuring import QuietMeasurements

            config.pluginmanager.register(QuietMeasurements(), "cci-quiet-measurements")
        return
    if _asked_for_certification(config) or settings.stateful_examples is not None:
        try:
            settings.validate()
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
    if settings.report_dir is not None:
        settings.report_dir.mkdir(parents=True, exist_ok=True)
        from .certify.measurement_store import MeasurementStore

        MeasurementStore(settings.report_dir).clear()  # before any worker starts: this run's measurements only
        if not config.option.xmlpath:
            config.option.xmlpath = str(settings.report_dir / "junit.xml")
    from .certify.run_report import CertificationReporter

    reporter = CertificationReporter(config, settings)
    config.pluginmanager.register(reporter, "cci-reporter")
    config.pluginmanager.register(StartFailureStop(config, reporter), "cci-start-failure-stop")
    if _asked_for_certification(config):
        config.pluginmanager.register(StartupProbe(reporter), "cci-startup-probe")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistCount(reporter), "cci-xdist-count")


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    settings = config.stash[SETTINGS]
    # A backend that builds machines: one machine per process. Any other when the run asked loadscope
    # (`cci-conformance run -n`): one machine's tests of one module per scope, so a process starts only the shared
    # nodes of what it runs and a machine's slow tests spread. Another --dist (the harness's `pytest -n 2`) keeps
    # xdist's scheduler.
    spreads = spreads_by_machine(settings)
    if not (spreads or config.getoption("dist", None) == "loadscope"):
        return None
    from .certify.machine_scheduling import MachineScheduling

    if not spreads:  # scopes in collection order, which starts the long tests first (_long_first), not by size
        config.option.loadscopereorder = False
    return MachineScheduling(config, log, tuple(settings.topologies), by_module=not spreads)


def _spreads_by_module(config: pytest.Config) -> bool:
    """The controller of a run spread over workers by module scopes (pytest_xdist_make_scheduler's by_module)."""
    return config.getoption("dist", None) == "loadscope" and not spreads_by_machine(config.stash[SETTINGS])


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    # xdist sets a worker's own --dist to "no" (xdist/remote.py setup_config): only the controller knows how the
    # run spreads, so it tells each worker here
    node.workerinput[LONG_FIRST] = _spreads_by_module(node.config)


def _long_first(config: pytest.Config) -> bool:
    """A worker of an embedded run spread by module scopes (pytest_xdist_make_scheduler): the longest tests go
    first, so the last minute is not one machine's ACCT-010 while the other workers idle."""
    return _is_worker(config) and bool(config.workerinput.get(LONG_FIRST, False))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if _is_worker(config):  # what this worker ran on (its kind clusters) reaches the controller's report, and
        _finish_backend(config, facts=True)  # is released before xdist hears the worker is done (kind.py)


def pytest_unconfigure(config: pytest.Config) -> None:
    if not _is_worker(config):  # the only process, or the controller once xdist stopped every worker
        _finish_backend(config, facts=False)


def _finish_backend(config: pytest.Config, facts: bool) -> None:
    from .backends.registry import get_backend

    settings = config.stash.get(SETTINGS, None)
    if settings is None:
        return
    try:
        backend = get_backend(settings.backend)
    except ConfigError:
        return  # reported as a usage error already
    if facts:
        config.workeroutput[WORKER_FACTS] = {**backend.run_facts(), **suite_facts(config)}
    backend.finish()


def pytest_report_header(config: pytest.Config) -> list[str]:
    settings = config.stash[SETTINGS]
    return [f"cci-conformance: driver {settings.driver}, topologies {', '.join(settings.topologies)}, "
            f"backend {settings.backend}, latency profile {settings.profile}"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "topology_name" not in metafunc.fixturenames:
        return
    for marker in metafunc.definition.iter_markers("parametrize"):
        names = marker.args[0] if marker.args else ""
        if "topology_name" in (names if isinstance(names, list | tuple) else names.split(",")):
            return  # the test chose its machines itself
    names = list(metafunc.config.stash[SETTINGS].topologies)
    # Session scope groups tests by machine, so each topology is loaded and rendered once.
    metafunc.parametrize("topology_name", names, ids=names, scope="session")


def _marker_args(item: pytest.Item, name: str) -> list:
    return [arg for marker in item.iter_markers(name) for arg in marker.args]


def _check_item(item: pytest.Item, settings: RunSettings, use_catalog: bool) -> str | None:
    """Validate an item's markers; mark capability skips. Returns a problem text, or None."""
    ids = _marker_args(item, "requirement")
    caps = _marker_args(item, "needs")
    if not ids and not caps and not use_catalog:
        return None
    if ids or use_catalog:
        catalog = settings.catalog  # ConfigError propagates: a broken catalog is a collection error
        unknown = [i for i in ids if not isinstance(i, str) or i not in catalog]
        if unknown:
            return (f"unknown requirement id {unknown[0]!r} in @pytest.mark.requirement; fix: use an id of "
                    f"{catalog.path} or add the requirement there")
        listed = catalog.requirements_for_test(base_test_id(item.nodeid))  # named in the catalog's `tests`
        if ids or listed:
            item.user_properties.append((PROP_REQUIREMENTS, sorted(set(ids) | set(listed))))
    bad_caps = [c for c in caps if c not in KNOWN_CAPABILITIES]
    if bad_caps:
        return (f"unknown capability {bad_caps[0]!r} in @pytest.mark.needs; fix: use one of "
                + ", ".join(KNOWN_CAPABILITIES))
    missing = [c for c in caps if c not in settings.manifest.capabilities]
    if missing:
        reason = capability_skip_reason(settings.manifest.name, missing[0])
        item.add_marker(pytest.mark.skip(reason=reason))
        item.user_properties.append((PROP_NA, {"kind": CAPABILITY_NA_KIND, "reason": reason}))
    return None


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    settings = config.stash[SETTINGS]
    use_catalog = settings.report_dir is not None or any(i.get_closest_marker("requirement") for i in items)
    keep = []
    for item in items:
        try:
            problem = _check_item(item, settings, use_catalog)
        except ConfigError as exc:
            problem = str(exc)
        if problem is None:
            keep.append(item)
            continue
        # A real collection error: pytest (and xdist's controller) stop before running anything.
        report = pytest.CollectReport(item.nodeid, "failed", longrepr=problem, result=[])
        config.hook.pytest_collectreport(report=report)
    if _long_first(config):
        keep.sort(key=lambda i: i.get_closest_marker("long") is None)  # stable: otherwise collection order
    items[:] = keep


def pytest_collection_finish(session: pytest.Session) -> None:
    # after every deselection (-k, -m): only a run that will measure LAT-004 plans its growth machines
    _prepare_backend(session.config.stash[SETTINGS],
                     any(GROWTH_REQUIREMENT in _marker_args(i, "requirement") for i in session.items))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    report = yield
    if report.failed and call.excinfo is not None and call.excinfo.errisinstance(NodeFault):
        # a new list: pytest shares the item's, and this phase's fault must not mark the next phase's report
        report.user_properties = [*report.user_properties, (PROP_NODE_FAULT, str(call.excinfo.value))]
    if report.failed and report.when in ("setup", "call"):
        item.stash[FAILED] = True
        settings = item.config.stash[SETTINGS]
        paths = collect_failure_evidence(settings.report_dir, item.nodeid, item.stash.get(SESSIONS_USED, []))
        if paths:
            report.user_properties.append((PROP_EVIDENCE, paths))
    return report
