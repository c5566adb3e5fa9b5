"""The conformance suites: their fixtures, markers, topology parametrisation and reports come from the
cci_conformance pytest plugin (cci_conformance/plugin.py, fixtures in fixtures/); see docs/certification.md."""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # Without the plugin every marker and fixture below would be unknown: fail with what to do instead.
    manager = config.pluginmanager
    if not (manager.hasplugin("cci_conformance") or manager.hasplugin("cci_conformance.plugin")):
        raise pytest.UsageError("the cci_conformance pytest plugin is not loaded; fix: `pip install -e .` in the "
                                "harness checkout (it registers the plugin), or pass -p cci_conformance.plugin")


def pytest_ignore_collect(collection_path, config: pytest.Config):
    """suites/dra certifies DRA drivers on kind: a run of a CCI driver never collects it.

    Its tests name requirements of its own catalog (suites/dra/requirements.yaml), unknown to
    the CCI catalog, and need kind clusters; `cci-conformance run` picks that folder for a manifest
    with protocol dra/v1 (docs/dra-cpu.md).
    """
    if collection_path.name != "dra" or collection_path.parent != Path(__file__).parent:
        return None
    from cci_conformance.certify.stash import SETTINGS

    settings = config.stash.get(SETTINGS, None)
    try:
        is_dra = settings is not None and settings.manifest.is_dra
    except Exception:  # a bad manifest is reported by the plugin, not here
        is_dra = False
    return None if is_dra else True
