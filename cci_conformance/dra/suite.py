"""How the DRA suites get their sessions: one per machine and node profile, opened by the run's backend."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from ..topology.model import Topology
from .api import DraSession, DraSessionConfig, NodeProfile

Opener = Callable[[DraSessionConfig], DraSession]
# The harness's own tests put an in-process opener here (cci_conformance/dra/fake.py); a run never does, so a
# certificate always comes from a real node.
OPENER = pytest.StashKey[Opener]()
DEFAULT_KUBERNETES = "v1.37.2"


def kind_opener(config: DraSessionConfig) -> DraSession:
    from .kind_session import KindDraSession  # docker and kubectl only when a real node is asked for

    return KindDraSession.open(config)


class Sessions:
    """The open sessions of a run, one per (machine, profile), each closed at the end of the run."""

    def __init__(self, opener: Opener, manifest: Path, kubernetes: str, facts: dict | None = None,
                 device_mode: str = "individual"):
        self.opener, self.manifest, self.kubernetes = opener, manifest, kubernetes
        self.device_mode = device_mode
        self.facts = {} if facts is None else facts  # report.json run.backend_facts: what the nodes ran
        self.facts["kubernetes"] = kubernetes
        self.facts["device_mode"] = device_mode
        self._open: dict[tuple[str, str], DraSession | BaseException] = {}
        self._workdir: Path | None = None  # made with the first session, removed by shutdown()

    def get(self, topology: Topology, profile: NodeProfile) -> DraSession:
        key = (topology.name, profile.name)
        if key not in self._open:
            # one node at a time: a kind cluster per (machine, profile) is what this host has room for; the
            # suites' conftest orders the tests so that none of them comes back to a closed one
            self.close()
            if self._workdir is None:
                self._workdir = Path(tempfile.mkdtemp(prefix="cci-dra-"))
            config = DraSessionConfig(topology, profile, self.manifest, self.kubernetes,
                                      self._workdir / f"{topology.name}-{profile.name}", self.device_mode)
            try:
                self._open[key] = self.opener(config)
                for name, value in getattr(self._open[key], "facts", {}).items():  # node image, driver image
                    if isinstance(value, list):  # the clusters: every session's
                        self.facts[name] = [*self.facts.get(name, []), *value]
                    else:
                        self.facts.setdefault(name, value)
            except Exception as exc:  # a node that never came up: every test on it errors with this (untested)
                self._open[key] = exc
        found = self._open[key]
        if isinstance(found, BaseException):
            raise found
        return found

    def close(self) -> None:
        for session in self._open.values():
            if not isinstance(session, BaseException):
                session.close()
        self._open.clear()

    def shutdown(self) -> None:
        """Close every session and remove the run's scratch dir: a run leaves nothing behind in /tmp."""
        try:
            self.close()
        finally:
            if self._workdir is not None:
                shutil.rmtree(self._workdir, ignore_errors=True)
                self._workdir = None
