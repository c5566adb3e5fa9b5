"""Stop a run whose node or driver cannot come up: one message, REG-001 failed if the driver did not register."""

from __future__ import annotations

import pytest

from .. import interrupts
from ..backends.base import NodeStartFailed
from .collector import PROP_RUN_STOPPED
from .outcomes import FAILED, TestResult
from .probe import PROBE_NODEID, PROBE_REQUIREMENT
from .stash import SETTINGS

WORKER_STOP = "cci_stopped_early"  # workeroutput key: a pytest-xdist worker's start failure, for the controller


def record_stop(config: pytest.Config, reporter, failure: str, driver_at_fault: bool, consequence: str) -> None:
    """The report's run.stopped_early and its one driver-start error; REG-001 failed when the driver did not
    register (its requirement: register within startup_timeout_s), every other requirement untested."""
    if reporter.stopped_early:  # the first cause is the one to fix; a second worker meets the same
        return
    settings = config.stash[SETTINGS]
    reporter.stopped_early = f"{failure}; {consequence}"
    reporter.errors.append({"kind": "driver-start", "where": str(settings.manifest.path), "message": failure})
    if driver_at_fault and PROBE_REQUIREMENT in settings.catalog:
        reporter.collector.results[PROBE_NODEID] = TestResult(  # the full message is run.stopped_early
            PROBE_NODEID, FAILED, "the driver was not registered within startup_timeout_s, so the run stopped "
            "(see run.stopped_early)", requirements=[PROBE_REQUIREMENT])
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is not None:
        if terminal._tw.width_of_current_line:  # after pytest's progress letters: a line of its own
            terminal.write("\n")
        terminal.write_line(f"[cci] STOPPED {reporter.stopped_early}", red=True)


class StartFailureStop:
    """A test whose node could not start (NodeStartFailed) stops the run after it.

    The startup probe (plugin.py) catches this before the first test in one process; a backend that spreads
    the run over pytest-xdist workers (kind, each worker its own clusters) meets it in a worker instead, which
    without this stop failed every later test of the worker at once, one identical error each.
    """

    CONSEQUENCE = "the run stopped: every requirement it had not proven is untested"

    def __init__(self, config: pytest.Config, reporter=None):
        self.config = config
        self.reporter = reporter  # None in a pytest-xdist worker, which hands the stop to the controller

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call):
        report = yield
        if not (report.failed and call.excinfo is not None and call.excinfo.errisinstance(NodeStartFailed)):
            return report
        exc = call.excinfo.value
        failure = " ".join(" ".join([str(exc), *getattr(exc, "__notes__", [])]).split())  # notes: the logs kept
        report.user_properties = [*report.user_properties, (PROP_RUN_STOPPED, failure)]
        if not item.session.shouldstop:
            item.session.shouldstop = failure  # pytest (or xdist's worker loop) ends after this test
            if self.reporter is None:  # a worker: the controller records it when the worker is down
                self.config.workeroutput[WORKER_STOP] = {"message": failure,
                                                         "driver_at_fault": exc.driver_at_fault}
            else:
                record_stop(self.config, self.reporter, failure, exc.driver_at_fault, self.CONSEQUENCE)
        return report

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        stop = getattr(node, "workeroutput", {}).get(WORKER_STOP)
        if stop and self.reporter is not None:  # xdist stops the other workers next (shouldstop came along)
            record_stop(self.config, self.reporter, stop["message"], stop["driver_at_fault"], self.CONSEQUENCE)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # shouldstop ends the session as an interruption (pytest and xdist raise Interrupted); this stop is the
        # run's verdict, not a user's interrupt: exit 1 as for a failed requirement, and a complete report
        stopped = self.reporter is not None and self.reporter.stopped_early
        if stopped and session.exitstatus == pytest.ExitCode.INTERRUPTED and not interrupts.requested():
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
