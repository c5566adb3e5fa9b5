"""The controller side of a run: gather every test report, keep report.json current, write the bundle at the end."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from .. import __version__
from . import bundle
from .collector import ResultCollector, report_reason
from .html import render_html
from .junit import split_preconditions
from .outcomes import TestResult
from .report import build_report, validation_errors, write_json_atomic
from .settings import RunSettings
from .stash import suite_facts
from .summary import progress_line, summary_lines

INCREMENTAL_EVERY_S = 0.5  # how often, at most, report.json is rewritten while tests finish


def merge_facts(parts: list[dict]) -> dict:
    """The run's backend facts from every process that ran tests: mappings merged key by key, lists joined
    without repeats, a value the processes agree on kept once (the node image is one for the run), values they
    differ on kept all, as a list (a machine that was a worker in two processes' clusters names both nodes)."""
    merged: dict = {}
    for part in parts:
        for key, value in part.items():
            have = merged.get(key)
            if isinstance(have, dict) and isinstance(value, dict):
                merged[key] = merge_facts([have, value])
            elif isinstance(have, list) and isinstance(value, list):
                merged[key] = have + [v for v in value if v not in have]
            elif have is None:
                merged[key] = value
            elif have != value:
                merged[key] = [have, value] if not isinstance(have, list) else have + [value]
    return merged


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class CertificationReporter:
    """Registered in the controller (or the only process): workers' reports reach it through xdist."""

    def __init__(self, config: pytest.Config, settings: RunSettings):
        self.config = config
        self.settings = settings
        self.collector = ResultCollector()
        self.errors: list[dict] = []
        self.total = 0
        self.started = _now()
        self.t0 = time.monotonic()
        self.last_write = 0.0
        self.report: dict | None = None
        self.environment = bundle.environment()
        self.driver_digest: dict | None | bool = False  # False: not computed yet
        self.stopped_early: str | None = None  # why no test ran (the startup probe), see probe.py
        self.worker_facts: list[dict] = []  # each pytest-xdist worker's Backend.run_facts() (plugin.py)

    # ------------------------------------------------------------------ hooks
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if session.items:
            self.total = len(session.items)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.errors.append({"kind": "collection", "where": report.nodeid or "(session)",
                                "message": report_reason(report) or str(report.longrepr)[:400]})

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        done = self.collector.add(report)
        if done is None:
            return
        if self.settings.progress:
            self._write_progress(done)
        if self._is_certification() and time.monotonic() - self.last_write >= INCREMENTAL_EVERY_S:
            self._write(complete=False, interrupted=False, exit_status=None)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        exitstatus = session.exitstatus  # early_stop.py turns a stop of its own from an interrupt into a fail
        interrupted = exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR)
        if interrupted:
            self.collector.interrupted()
        if self._is_certification():
            self._write(complete=not interrupted, interrupted=interrupted, exit_status=int(exitstatus), final=True)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.report is None:
            return
        terminalreporter.section("cci-conformance certification")
        for line in summary_lines(self.report, self.settings.report_dir):
            terminalreporter.write_line(line)

    # ------------------------------------------------------------------ helpers
    def _is_certification(self) -> bool:
        """Only runs that prove requirements (or were asked for a report) produce one."""
        if self.settings.report_dir is not None:
            return True
        return any(r.requirements for r in self.collector.results.values())

    def _write_progress(self, result: TestResult) -> None:
        line = progress_line(self.collector.finished, self.total, result)
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:
            if terminal._tw.width_of_current_line:  # after pytest's progress dots: start a line of our own
                terminal.write("\n")
            terminal.write_line(line)
        else:
            sys.__stdout__.write(line + "\n")
            sys.__stdout__.flush()

    def _run_metadata(self, interrupted: bool, exit_status: int | None, final: bool) -> dict:
        settings = self.settings
        try:
            manifest = settings.manifest
            name, caps, version = manifest.name, sorted(manifest.capabilities), getattr(manifest, "version", None)
            manifest_path = manifest.path
        except Exception:  # a bad manifest was already reported as a config error
            name, caps, version, manifest_path = None, [], None, Path(settings.driver)
        if self.driver_digest is False:  # once, at the first write: the digest of what this run started
            folder = manifest_path if manifest_path.is_dir() else manifest_path.parent
            # A backend that ran something else than the folder (the kind image of a DRA driver) says so here.
            self.driver_digest = settings.extra.get("driver_digest") or (bundle.folder_digest(folder) if name else None)
        topologies = []
        for topo_name in settings.topologies:
            entry = {"name": topo_name}
            try:
                from .settings import load_topology

                topo = load_topology(topo_name)
                entry.update(cpus=len(topo.cpus), numa_nodes=len(topo.nodes))
            except Exception:
                pass
            topologies.append(entry)
        try:
            profile = settings.budgets.as_dict()
        except Exception:
            profile = None
        try:
            node_mode = settings.node_profile_data.get("mode")
        except Exception:  # a bad node profile was already reported as a config error
            node_mode = None
        workers = getattr(self.config.option, "numprocesses", None) or 0
        try:
            from ..backends.registry import get_backend

            backend_facts = merge_facts([get_backend(settings.backend).run_facts(), suite_facts(self.config),
                                         *self.worker_facts])
        except Exception:  # an unknown backend was already reported as a config error
            backend_facts = {}
        return {
            "interrupted": interrupted, "started": self.started, "finished": _now() if final else None,
            "duration_s": round(time.monotonic() - self.t0, 3), "harness_version": __version__,
            "driver": {"name": name, "version": version, "manifest": str(manifest_path),
                       "manifest_sha256": bundle.file_sha256(manifest_path), "digest": self.driver_digest,
                       "capabilities": caps},
            "topologies": topologies, "backend": settings.backend, "backend_facts": backend_facts,
            "node_profile": settings.node_profile,
            "node_mode": node_mode,
            "profile": profile, "workers": int(workers) if isinstance(workers, int) else 0,
            "pytest_args": [str(a) for a in self.config.invocation_params.args],
            "exit_status": exit_status, "stopped_early": self.stopped_early,
            "stateful_examples": settings.stateful_examples_on(settings.backend),
            "environment": {k: v for k, v in self.environment.items() if k != "harness_version"},
        }

    def _split_junit(self, report: dict) -> None:
        """junit.xml (written by pytest's junitxml before this trylast hook) keeps preconditions apart."""
        xmlpath = getattr(self.config.option, "xmlpath", None)
        if not xmlpath:
            return
        tests = {kind: {t["nodeid"] for r in report["requirements"] if (r["kind"] == "driver") == (kind == "driver")
                        for t in r["tests"] if t["outcome"] != "missing"} for kind in ("driver", "node-precondition")}
        split_preconditions(Path(xmlpath), tests["node-precondition"] - tests["driver"])

    def _write(self, *, complete: bool, interrupted: bool, exit_status: int | None, final: bool = False) -> None:
        self.last_write = time.monotonic()
        try:
            catalog = self.settings.catalog
        except Exception as exc:
            self.errors.append({"kind": "config", "where": "catalog", "message": str(exc)})
            return
        report = build_report(catalog=catalog, results=self.collector.results,
                              run=self._run_metadata(interrupted, exit_status, final),
                              errors=list(self.errors), complete=complete)
        if final:
            problems = validation_errors(report)
            if problems:  # the harness's own bug: say so in the report instead of hiding it
                report["errors"].append({"kind": "internal", "where": "report.schema.json",
                                         "message": "; ".join(problems[:5])})
                if report["verdict"]["state"] != "invalid":
                    report["verdict"].update(certified=False, state="not-certified", exit_code=1)
        self.report = report
        out = self.settings.report_dir
        if out is None:
            return
        write_json_atomic(out / bundle.REPORT_JSON, report)
        if final:
            self._split_junit(report)
            write_json_atomic(out / bundle.ENVIRONMENT_JSON, self.environment)
            bundle.copy_manifest(out, Path(report["run"]["driver"]["manifest"]))
            (out / bundle.REPORT_HTML).write_text(render_html(report))
