"""Keys under which the plugin and the fixtures share per-run and per-test state on pytest objects."""

from __future__ import annotations

import pytest

from .settings import RunSettings

SETTINGS = pytest.StashKey[RunSettings]()  # on config: the run's options
SESSIONS_USED = pytest.StashKey[list]()  # on an item: node sessions the test used (evidence on failure)
FAILED = pytest.StashKey[bool]()  # on an item: its setup or call failed (its shared node is replaced)
PROBED = pytest.StashKey[object]()  # on config: the startup probe's ProbeResult (its session becomes a shared node)
SUITE_FACTS = pytest.StashKey[dict]()  # on config: what a suite's own sessions ran on (the DRA suites' Kubernetes
# release and node image), merged into report.json run.backend_facts beside the backend's


def suite_facts(config: pytest.Config) -> dict:
    return config.stash.setdefault(SUITE_FACTS, {})


def sessions_used(item: pytest.Item) -> list:
    return item.stash.setdefault(SESSIONS_USED, [])
