"""The conformance suites: their fixtures, markers, topology parametrisation and reports come from the
cci_conformance pytest plugin (cci_conformance/plugin.py, fixtures in fixtures/); see docs/certification.md."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # Without the plugin every marker and fixture below would be unknown: fail with what to do instead.
    manager = config.pluginmanager
    if not (manager.hasplugin("cci_conformance") or manager.hasplugin("cci_conformance.plugin")):
        raise pytest.UsageError("the cci_conformance pytest plugin is not loaded; fix: `pip install -e .` in the "
                                "harness checkout (it registers the plugin), or pass -p cci_conformance.plugin")
