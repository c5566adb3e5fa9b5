"""Start the driver once before any test, so a driver that never comes up stops the run in seconds with one message."""

from __future__ import annotations

from dataclasses import dataclass

from ..backends.base import NodeSession
from .sessions import SessionOpener
from .settings import RunSettings, load_topology

# The requirement the probe proves when it fails: "The driver MUST register through the plugin
# watcher within startup_timeout_s" (suites/requirements.yaml). Every other requirement is untested.
PROBE_REQUIREMENT = "REG-001"
PROBE_NODEID = "cci-conformance::driver-startup-probe"


@dataclass
class ProbeResult:
    """A node session with the driver registered (handed on to the tests), or why there is none."""

    opener: SessionOpener
    session: NodeSession | None = None
    topology: str = ""
    failure: str = ""  # the one message the run stops with
    driver_at_fault: bool = False  # the driver did not register (REG-001 fails), not the node failing to start


def probe_driver(settings: RunSettings) -> ProbeResult:
    """Open one node session on the run's first topology and wait for the driver's registration.

    Without it a driver that never registers costs every test its startup timeout and prints the
    same error once per test (minutes and hundreds of lines) before the run can say so.
    """
    manifest = settings.manifest
    opener = SessionOpener(settings.backend, settings.report_dir)
    topology = settings.topologies[0]
    where = (f"driver {manifest.name} (manifest {manifest.path}, startup_timeout_s {manifest.startup_timeout_s:g} s) "
             f"on {topology}")
    try:
        session = opener.open(load_topology(topology), settings.node_profile_data, manifest.path, label="shared")
    except Exception as exc:
        text = " ".join(str(exc).split())[:400]
        notes = " ".join(getattr(exc, "__notes__", []))
        return ProbeResult(opener, failure=f"{where} did not come up: {text}" + (f"; {notes}" if notes else ""),
                           driver_at_fault=getattr(exc, "driver_at_fault",  # NodeStartFailed knows
                                                   manifest.name in text or "driver" in text.lower()))
    try:
        registered = manifest.name in session.snapshot().drivers
    except Exception as exc:
        registered, why = False, f"the node did not answer: {exc}"
    else:
        why = "its process exited before the node registered it (see the driver log in the bundle's sessions/)"
    if registered:
        return ProbeResult(opener, session=session, topology=topology)
    opener.close(session)
    return ProbeResult(opener, failure=f"{where} is not registered: {why}", driver_at_fault=True)
