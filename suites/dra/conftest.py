"""The DRA suites' fixtures: a session per machine and node profile, and a node handle that cleans up after a test.

Run through `cci-conformance run --driver DIR` for a `protocol: dra/v1` manifest, or
`pytest suites/dra --cci-driver DIR --cci-backend kind --cci-report-dir OUT [--dra-kubernetes v1.37.2]`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cci_conformance.certify.settings import load_topology
from cci_conformance.certify.stash import SETTINGS, sessions_used, suite_facts
from cci_conformance.dra import api
from cci_conformance.dra.suite import DEFAULT_KUBERNETES, OPENER, Sessions, kind_opener
from cci_conformance.kind.image import versions

SESSIONS = pytest.StashKey[Sessions]()
PROFILES = {"none": api.POLICY_NONE, "static-reserved": api.static_reserved()}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dra", "DRA suites")
    group.addoption("--dra-kubernetes", default=DEFAULT_KUBERNETES, metavar="VERSION",
                    help=f"Kubernetes release of the nodes (default {DEFAULT_KUBERNETES}, the vanilla image)")
    group.addoption("--dra-device-mode", default="individual", choices=api.DEVICE_MODES,
                    help="how the driver publishes CPUs (its --cpu-device-mode): a device per CPU, or per NUMA "
                         "node with the CPUs as consumable capacity (default individual)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "dra_profile(name): the kubelet profile the test needs (none, static-reserved)")
    settings = config.stash[SETTINGS]
    if settings.manifest is not None and not settings.manifest.is_dra:
        raise pytest.UsageError(f"the DRA suites certify DRA drivers; {settings.manifest.path} has protocol "
                                f"{settings.manifest.protocol}; fix: a driver.yaml with protocol: dra/v1")
    kubernetes = versions.release(config.getoption("dra_kubernetes"), field="--dra-kubernetes").kubernetes
    opener = config.stash.get(OPENER, None) or kind_opener
    manifest = settings.manifest.path if settings.manifest is not None else Path("driver.yaml")
    config.stash[SESSIONS] = Sessions(opener, manifest, kubernetes, suite_facts(config),
                                      device_mode=config.getoption("dra_device_mode"))


def pytest_unconfigure(config: pytest.Config) -> None:
    sessions = config.stash.get(SESSIONS, None)
    if sessions is not None:
        sessions.shutdown()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "dra_topology" in metafunc.fixturenames:
        names = list(metafunc.config.stash[SETTINGS].topologies)
        metafunc.parametrize("dra_topology", names, ids=names, scope="session", indirect=True)


@pytest.hookimpl(trylast=True)  # after pytest grouped the tests by the session-scoped machine
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test of one machine and profile together, so each node is opened once (Sessions keeps one open)."""
    def key(item: pytest.Item) -> tuple[str, str]:
        params = getattr(item, "callspec", None)
        marker = item.get_closest_marker("dra_profile")
        return (params.params.get("dra_topology", "") if params else "", marker.args[0] if marker else "none")
    order = {k: i for i, k in enumerate(dict.fromkeys(map(key, items)))}
    items.sort(key=lambda item: order[key(item)])


@pytest.fixture(scope="session")
def dra_topology(request):
    return load_topology(request.param)


class Node:
    """The session of one test: the pods it made are deleted when it ends, whatever it asserted."""

    def __init__(self, session: api.DraSession):
        self.session = session
        self.made: list[str] = []

    def __getattr__(self, name):
        return getattr(self.session, name)

    def create_pod(self, pod: api.PodSpec, **kwargs) -> api.PodState:
        self.made.append(pod.name)
        return self.session.create_pod(pod, **kwargs)

    def delete_pods(self, names: list[str], **kwargs) -> None:
        self.session.delete_pods(names, **kwargs)
        gone = set(names)
        self.made = [name for name in self.made if name not in gone]

    def require(self, feature: str) -> None:
        reason = api.missing_feature(self.session, feature)
        if reason:
            pytest.skip(reason)  # untested, never a pass

    def cleanup(self) -> None:
        for name in reversed(self.made):
            self.session.delete_pod(name)


@pytest.fixture
def dra(request, dra_topology, pytestconfig):
    marker = request.node.get_closest_marker("dra_profile")
    profile = PROFILES[marker.args[0] if marker else "none"]
    session = pytestconfig.stash[SESSIONS].get(dra_topology, profile)
    tracked = Node(session)  # deletes what the test made, newest first, whatever it asserted
    sessions_used(request.node).append(session)  # a failure copies its logs and state files into evidence/
    request.node.user_properties.append(("dra_kubernetes", pytestconfig.stash[SESSIONS].kubernetes))
    request.node.user_properties.append(("dra_device_mode", session.device_mode))
    yield tracked
    tracked.cleanup()
