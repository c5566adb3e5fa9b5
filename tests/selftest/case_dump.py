"""A pytest plugin (``-p case_dump``) writing every collected test's parameters and needed capabilities to JSON.

Used by test_case_capabilities.py on a ``--collect-only`` run of the suites: what pytest collects is what a
run sends, so the check reads the cases as pytest builds them (``pytest.param`` marks included)."""

from __future__ import annotations

import json
import os

OUT_ENV = "CCI_CASE_DUMP"


def pytest_collection_finish(session) -> None:
    path = os.environ.get(OUT_ENV)
    if not path:
        return
    cases = []
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        params = {k: v for k, v in (callspec.params.items() if callspec else ()) if k != "topology_name"}
        cases.append({"nodeid": item.nodeid, "params": params,
                      "needs": sorted({a for m in item.iter_markers("needs") for a in m.args}),
                      "requirements": sorted({a for m in item.iter_markers("requirement") for a in m.args})})
    with open(path, "w") as fh:
        json.dump(cases, fh, default=repr)
