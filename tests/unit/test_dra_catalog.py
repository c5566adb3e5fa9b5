"""The DRA suites' requirement catalog: valid under the shared schema, its ids its own, its tests real."""

from __future__ import annotations

import re

from cci_conformance.certify.catalog import load_catalog
from cci_conformance.paths import SUITES_DIR

CATALOG = SUITES_DIR / "dra" / "requirements.yaml"


def test_catalog_loads_with_the_shared_loader_and_schema():
    catalog = load_catalog(CATALOG)
    assert len(catalog.requirements) >= 10
    assert set(catalog.areas) >= {"claims", "accounting", "restart", "registration", "latency"}


def test_ids_never_collide_with_the_cci_catalog():
    # Reports and junit files are keyed by id: one id must mean one obligation in every catalog.
    assert not set(load_catalog(CATALOG).ids) & set(load_catalog().ids)


def test_listed_tests_exist():
    for req in load_catalog(CATALOG).requirements:
        assert req.tests, f"{req.id} names no test"
        for test_id in req.tests:
            module, _, name = test_id.partition("::")
            path = CATALOG.parent / module
            assert path.is_file(), f"{req.id}: {module} not in {CATALOG.parent}"
            assert re.search(rf"^def {re.escape(name.split('::')[-1])}\(", path.read_text(), re.M), test_id
