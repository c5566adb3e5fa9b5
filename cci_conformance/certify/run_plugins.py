"""The helper plugins a certification run registers: SIGTERM as Ctrl-C, the xdist test count, the startup probe."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from .. import interrupts
from ..errors import ConfigError
from .settings import RunSettings
from .stash import PROBED, SETTINGS

EXECNET_BOOTSTRAP = b"exec(eval(sys.stdin.readline()))"  # the command line of an xdist worker (execnet popen)
WORKER_FACTS = "cci_backend_facts"  # a pytest-xdist worker's Backend.run_facts(), sent to the controller


class SigtermInterrupt:
    """SIGTERM ends the run as Ctrl-C does (interrupts.py): report interrupted, every session closed."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem):
        result = yield
        if interrupts.pending():  # its KeyboardInterrupt was lost (raised in a finalizer, or caught): stop here
            item.session.shouldstop = "interrupted by SIGTERM"  # pytest raises session.Interrupted next
        return result

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        interrupts.handling()
        if interrupts.requested():  # SIGTERM may have reached this process alone (Ctrl-C reaches the terminal's
            _terminate_xdist_workers()  # whole group): its workers would wait for xdist's teardown, 5 to 10 s

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        interrupts.handling()  # closing the sessions from here on: a later SIGTERM must not cut that short

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        interrupts.uninstall()


def _terminate_xdist_workers() -> None:
    """SIGTERM this process's pytest-xdist workers (execnet popen children), which then stop as we do; a
    worker already interrupted ignores it (interrupts.py: one SIGTERM, one interrupt)."""
    try:
        children = {pid for task in Path("/proc/self/task").iterdir()
                    for pid in (task / "children").read_text().split()}
    except OSError:  # no /proc, or a kernel without the children file: xdist's teardown stops them
        return
    for pid in children:
        try:
            if EXECNET_BOOTSTRAP in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(int(pid), signal.SIGTERM)
        except OSError:  # exited meanwhile
            continue


def spreads_by_machine(settings: RunSettings) -> bool:
    """A backend that builds machines (kind) spreads the suites over xdist workers one machine each."""
    from ..backends.registry import get_backend

    try:
        return bool(getattr(get_backend(settings.backend), "spreads_by_machine", False))
    except ConfigError:
        return False


class XdistCount:
    """Under xdist the controller collects nothing; the workers tell it how many tests there are."""

    def __init__(self, reporter):
        self.reporter = reporter

    def pytest_testnodedown(self, node, error) -> None:
        facts = getattr(node, "workeroutput", {}).get(WORKER_FACTS)
        if facts:
            self.reporter.worker_facts.append(facts)

    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        self.reporter.total = max(self.reporter.total, len(ids))


def _uses_a_node(item: pytest.Item) -> bool:
    return bool({"node", "node_session_factory"} & set(getattr(item, "fixturenames", ())))


class StartupProbe:
    """Before the first test, start the driver once (certify/probe.py); if it never comes up, run nothing.

    Under xdist (the controller runs no test) the probe overlaps the workers' start and is closed;
    otherwise its session becomes the first topology's shared node, so a good driver pays nothing.
    """

    def __init__(self, reporter):
        self.reporter = reporter

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session):
        config = session.config
        distributed = config.pluginmanager.getplugin("dsession") is not None
        if config.option.collectonly or (not distributed and not any(_uses_a_node(i) for i in session.items)):
            return None
        from .early_stop import record_stop
        from .probe import probe_driver

        settings = config.stash[SETTINGS]
        if distributed and spreads_by_machine(settings):
            # The probe's node would be a cluster of the controller's own, booted before any worker's and idle to
            # the end; each worker instead makes its clusters once, and the first whose cluster or driver could
            # not start stops the run (certify/early_stop.py).
            return None
        result = probe_driver(settings)
        if not result.failure:
            if distributed:
                result.opener.close_all()
            else:
                config.stash[PROBED] = result
            return None
        record_stop(config, self.reporter, result.failure, result.driver_at_fault,
                    "every requirement is untested: no test ran")
        session.testsfailed += 1  # exit 1, as for a failed requirement
        return True  # run no test (and under xdist, schedule none)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        result = session.config.stash.get(PROBED, None)
        if result is not None and not getattr(result, "adopted", False):  # no test took its session
            result.opener.close_all()
