"""Open node sessions for the suites and always close them, keeping each session's logs and state files."""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import warnings
from pathlib import Path

from ..backends.base import NodeSession, SessionConfig
from ..backends.registry import get_backend
from ..topology.model import Topology
from .bundle import evidence_dir, relative, sessions_dir

_SEQUENCE = itertools.count(1)


def _worker() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def short_workdir() -> Path:
    # Unix socket paths must stay within 107 bytes: a short directory under /tmp, not pytest's tmp_path.
    return Path(tempfile.mkdtemp(prefix="cci-", dir="/tmp"))


class OpenSession:
    """A session together with the scratch directory it lives in and a label for its bundle folder."""

    def __init__(self, session: NodeSession, workdir: Path, label: str):
        self.session = session
        self.workdir = workdir
        self.label = label


class SessionOpener:
    """Opens sessions through a backend and closes every one it opened, newest first, even after failures."""

    def __init__(self, backend: str, report_dir: Path | None):
        self.backend = backend
        self.report_dir = Path(report_dir) if report_dir else None
        self._open: list[OpenSession] = []

    def open(self, topology: Topology, node_profile: dict, driver_manifest: Path | None,
             env: dict[str, str] | None = None, label: str = "") -> NodeSession:
        label = f"{_worker()}-{next(_SEQUENCE):03d}-{topology.name}" + (f"-{label}" if label else "")
        workdir = short_workdir()
        # The opener owns the scratch directory: a backend removes only a directory it found empty, so
        # a failed start's logs are still there for _keep_logs (the bundle's "-failed-start" folder).
        (workdir / "OWNER").write_text("cci-conformance SessionOpener: removed when the session closes\n")
        config = SessionConfig(topology=topology, node_profile=node_profile, driver_manifest=driver_manifest,
                               workdir=workdir, env=dict(env or {}))
        try:
            session = get_backend(self.backend).open(config)
        except BaseException as exc:
            kept = self._keep_logs(workdir, label)
            shutil.rmtree(workdir, ignore_errors=True)
            if kept:
                exc.add_note(f"node and driver logs of the failed start: {kept}")
            raise
        self._open.append(OpenSession(session, workdir, label))
        return session

    def _keep_logs(self, workdir: Path, label: str) -> Path | None:
        """Logs of a session that never came up (e.g. a driver that never registered)."""
        logs = workdir / "logs"
        if self.report_dir is None or not logs.is_dir():
            return None
        dest = sessions_dir(self.report_dir, label + "-failed-start")
        shutil.copytree(logs, dest, dirs_exist_ok=True)
        return dest

    def close(self, session: NodeSession) -> None:
        for entry in list(self._open):
            if entry.session is session:
                self._open.remove(entry)
                self._close(entry)

    def close_all(self) -> None:
        errors = []
        while self._open:
            entry = self._open.pop()
            try:
                self._close(entry)
            except Exception as exc:  # keep closing the others; report the first problem at the end
                errors.append(exc)
        if errors:
            raise errors[0]

    def _close(self, entry: OpenSession) -> None:
        try:
            if self.report_dir is not None:  # the bundle keeps each node's files as they were at its end
                try:
                    entry.session.collect_evidence(sessions_dir(self.report_dir, entry.label))
                except Exception as exc:
                    warnings.warn(f"could not collect the files of session {entry.label}: {exc}", stacklevel=2)
            entry.session.close()
        finally:
            shutil.rmtree(entry.workdir, ignore_errors=True)


def collect_failure_evidence(report_dir: Path | None, nodeid: str, sessions: list[NodeSession]) -> list[str]:
    """Copy what the given live sessions hold into evidence/<test>/; paths relative to the report dir."""
    if report_dir is None:
        return []
    paths: list[str] = []
    for n, session in enumerate(sessions):
        dest = evidence_dir(report_dir, nodeid) / f"session-{n}"
        try:
            for path in session.collect_evidence(dest):
                paths.append(relative(path, report_dir))
        except Exception as exc:  # evidence is best effort; the failure itself is already recorded
            dest.mkdir(parents=True, exist_ok=True)
            (dest / "collect-error.txt").write_text(f"collect_evidence failed: {exc!r}\n")
            paths.append(relative(dest / "collect-error.txt", report_dir))
    return paths
