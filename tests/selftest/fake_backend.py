"""An in-process fake backend ("fake", test-only) so the plugin can be tested without real node or driver processes.

It hands out CPUs with a trivial rule (EXCLUSIVE claims take the lowest free CPUs, everything else
runs in the shared pool). The driver manifest's ``env`` selects a defect: ``FAKE_BUG=leak`` never
frees CPUs on delete, ``FAKE_BUG=start`` fails to start, ``FAKE_BUG=no-pending`` hands out
snapshots without their ``pending`` field once a pod was admitted. It offers none of the optional
hooks (``features`` is empty), as a backend that cannot reach the driver's socket or pause processes.
Every open and close is appended to the file named by ``CCI_FAKE_LOG`` (if set), so tests can check
that sessions are always closed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import ClassVar

import yaml

from cci_conformance.backends.base import NodeStartFailed, SessionConfig
from cci_conformance.backends.registry import register_backend
from cci_conformance.cpuset import format_cpulist
from cci_conformance.node.api import AdmissionResult, ContainerAssignment, NodeSnapshot, PersistedState, PodSpec


def _log(event: str, workdir: Path) -> None:
    target = os.environ.get("CCI_FAKE_LOG")
    if target:
        with open(target, "a") as fh:
            fh.write(f"{event} {workdir}\n")


class FakeSession:
    backend_name = "fake"
    pods_from_api_server = False
    features: frozenset[str] = frozenset()  # no optional hook: tests needing one are not-applicable

    def __init__(self, config: SessionConfig):
        self.topology = config.topology
        self.workdir = config.workdir
        self.online = frozenset(c.id for c in config.topology.cpus)
        self.exclusive: dict[str, frozenset[int]] = {}
        self.bug = ""
        self.drivers: tuple[str, ...] = ()
        if config.driver_manifest is not None:
            path = Path(config.driver_manifest)
            manifest = yaml.safe_load((path / "driver.yaml" if path.is_dir() else path).read_text())
            self.bug = manifest.get("env", {}).get("FAKE_BUG", "")
            self.drivers = (manifest["name"],)
        self.closed = False
        self.admissions = 0
        self.generation = 0  # node restarts, as NodeSnapshot.node_generation reports them
        self.registrations = 1  # driver (re-)registrations, as the node's Ping reports them
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        self.log = self.workdir / "logs" / "node.log"
        self.log.write_text("fake node started\n")
        if self.bug == "start":
            raise RuntimeError("fake driver never registered")
        _log("open", self.workdir)

    def _free(self) -> frozenset[int]:
        used = frozenset().union(*self.exclusive.values()) if self.exclusive else frozenset()
        return self.online - used

    def create_pod(self, pod: PodSpec, *, settle: bool = True) -> AdmissionResult:  # noqa: ARG002
        claims = {c.name: c for c in pod.claims}
        out = []
        for ctr in pod.containers:
            claim = claims.get(ctr.claim) if ctr.claim else None
            attrs = claim.parameters.get("cpu attributes", [[]])[0] if claim else []
            if claim and "EXCLUSIVE" in attrs:
                count = int(claim.parameters["cores"][0])
                free = sorted(self._free())
                if count > len(free):
                    return AdmissionResult(admitted=False, reason="CCIAdmitError", message="not enough CPUs")
                cpus = frozenset(free[:count])
                self.exclusive[f"{pod.uid}/{ctr.name}"] = cpus
                out.append(ContainerAssignment(pod.uid, ctr.name, f"c-{ctr.name}", cpus, True, "cci"))
            else:
                out.append(ContainerAssignment(pod.uid, ctr.name, f"c-{ctr.name}", self._free(), False, "shared"))
        with self.log.open("a") as fh:
            fh.write(f"admitted {pod.uid}\n")
        self.admissions += 1
        return AdmissionResult(admitted=True, containers=tuple(out), node_seconds=0.001, driver_seconds=0.0005)

    def create_pods(self, pods, *, settle: bool = True, overlap: bool = False) -> list[AdmissionResult]:
        return [self.create_pod(pod, settle=settle) for pod in pods]

    def delete_pods(self, pod_uids) -> None:
        for uid in pod_uids:
            self.delete_pod(uid)

    def delete_pod(self, pod_uid: str) -> None:
        if self.bug == "leak":
            return
        for key in [k for k in self.exclusive if k.startswith(pod_uid + "/")]:
            del self.exclusive[key]

    def snapshot(self) -> NodeSnapshot:
        fields = dict(mode="coexistence", online=self.online, reserved=frozenset(), shared_pool=self._free(),
                      exclusive=dict(self.exclusive), containers=(), drivers=self.drivers,
                      node_generation=self.generation, policy="static", withheld={}, pending=(), startup=(),
                      refused={}, registrations=self.registrations)
        if self.bug == "no-pending" and self.admissions:
            del fields["pending"]  # a backend that cannot tell what it owes the driver
        return NodeSnapshot(**fields)

    def state_files(self) -> dict[str, bytes]:
        data = {k: format_cpulist(v) for k, v in self.exclusive.items()}
        return {"cci_manager_state": json.dumps(data).encode()}

    def persisted_state(self) -> PersistedState:
        return PersistedState(cpu_manager_state=b"{}", cci_content=self.state_files()["cci_manager_state"].decode(),
                              pending=())

    def collect_evidence(self, dest: Path) -> list[Path]:
        dest.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, content in self.state_files().items():
            (dest / name).write_bytes(content)
            paths.append(dest / name)
        (dest / "node.log").write_text(self.log.read_text())
        paths.append(dest / "node.log")
        return paths

    def close(self) -> None:
        self.closed = True
        _log("close", self.workdir)

    # The rest of the NodeSession protocol is not needed by the self-tests.
    def restart_node(self, hard: bool = True) -> None:
        self.generation += 1

    def restart_driver(self, hard: bool = True) -> None:
        self.registrations += 1

    def stop_driver(self, hard: bool = True) -> None: ...
    def start_driver(self) -> None: ...
    def stop_container(self, pod_uid: str, container: str) -> None: ...
    def remove_container_behind_node(self, pod_uid: str, container: str) -> None: ...
    def allocatable_cpus(self) -> frozenset[int]:
        return self.online
    def listed_exclusive_cpus(self) -> dict[str, frozenset[int]]:
        return dict(self.exclusive)


@register_backend
class FakeBackend:
    name: ClassVar[str] = "fake"

    def prepare(self, groups) -> None:
        """Nothing to build ahead: sessions are in-process."""

    def run_facts(self) -> dict:
        return {}

    def finish(self) -> None:
        """Nothing outlives the sessions."""

    def open(self, config: SessionConfig) -> FakeSession:
        return FakeSession(config)


@register_backend
class SpreadingFakeBackend(FakeBackend):
    """"fake-spread": as "fake", but it spreads the suites over xdist workers one machine each (as kind does),
    reports which machines this process opened sessions on, and its pid, as its run facts, and a driver that does
    not start raises NodeStartFailed (as kind's does)."""

    name: ClassVar[str] = "fake-spread"
    spreads_by_machine = True
    opened: ClassVar[set[str]] = set()

    def run_facts(self) -> dict:
        pid = str(os.getpid())
        return {"clusters": [pid], "workers": {m: pid for m in sorted(self.opened)}} if self.opened else {}

    def open(self, config: SessionConfig) -> FakeSession:
        SpreadingFakeBackend.opened.add(config.topology.name)
        try:
            return super().open(config)
        except RuntimeError as exc:  # as kind says a driver that never registered with a worker's kubelet
            raise NodeStartFailed(f"driver of {config.driver_manifest} did not register on "
                                  f"{config.topology.name}: {exc}", driver_at_fault=True) from exc

    def finish(self) -> None:
        where = os.environ.get("CCI_WHERE_LOG")
        if where:
            with open(where, "a") as fh:
                fh.write(f"finish {os.getpid()} {os.environ.get('PYTEST_XDIST_WORKER', 'controller')}\n")
