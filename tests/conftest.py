"""The harness's own test session: a bytecode cache for the processes it starts, and its slowest tests first.

Bytecode: the self-tests start thousands of Python processes (certification runs, their nodes and drivers, each
node and driver restart of ACCT-010). With PYTHONDONTWRITEBYTECODE set each of them compiled the harness's
modules from source again; the session gives them a cache folder of its own instead, removed when it ends
(cci_conformance/bytecode.py, as `cci-conformance run` does for its run).

Order: slowest_first.py.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from slowest_first import order_slowest_first, steal_work

from cci_conformance import bytecode


def pytest_configure(config) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: the controller set its environment up
        return
    steal_work(config)
    if bytecode.writing_disabled(os.environ):
        folder = tempfile.mkdtemp(prefix="cci-test-pycache-")
        os.environ.pop(bytecode.OFF)  # the xdist workers and every process of the session inherit this
        os.environ[bytecode.PREFIX] = folder
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


def pytest_collection_modifyitems(config, items) -> None:
    order_slowest_first(items)
