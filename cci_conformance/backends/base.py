"""The small protocol every backend implements: realise a node with a driver, and observe it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol

from ..cpuset import CPUs
from ..node.api import AdmissionResult, NodeSnapshot, PodSpec
from ..topology.model import Topology


@dataclass(frozen=True)
class SessionConfig:
    """What a suite asks for: a machine, a node profile, a driver, and a scratch directory."""

    topology: Topology
    node_profile: dict  # parsed node profile (schema: cci_conformance/node/profile.py)
    driver_manifest: Path | None  # None = a node without a CCI driver
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)


class NodeSession(Protocol):
    """One running node with its driver. Every call has a deadline; close() leaves nothing behind."""

    topology: Topology

    def create_pod(self, pod: PodSpec) -> AdmissionResult: ...
    def delete_pod(self, pod_uid: str) -> None: ...
    def stop_container(self, pod_uid: str, container: str) -> None: ...
    def snapshot(self) -> NodeSnapshot: ...

    def restart_node(self, hard: bool = True) -> None: ...
    def restart_driver(self, hard: bool = True) -> None: ...
    def stop_driver(self, hard: bool = True) -> None: ...
    def start_driver(self) -> None: ...
    def remove_container_behind_node(self, pod_uid: str, container: str) -> None: ...  # the runtime drops a
    # container while the node is down (as containerd would after the container exits); the node must
    # reconcile it at its next start

    # Optional hooks the conformance suites use when a backend offers them (embedded does):
    # stop_node()/start_node() (node down while the runtime goes on), cci_endpoint() -> Path | None
    # (the driver's CCI socket, for retried calls the node never sends), pause_driver()/resume_driver().

    def allocatable_cpus(self) -> CPUs: ...  # pod-resources GetAllocatableResources
    def listed_exclusive_cpus(self) -> dict[str, CPUs]: ...  # pod-resources List: "<ns>/<pod>/<container>" -> cpu_ids
    def state_files(self) -> dict[str, bytes]: ...  # cpu_manager_state, cci_manager_state(.journal) as on disk
    def collect_evidence(self, dest: Path) -> list[Path]: ...  # logs, state files, cpusets
    def close(self) -> None: ...


class Backend(Protocol):
    name: ClassVar[str]

    def open(self, config: SessionConfig) -> NodeSession: ...


_BACKENDS: dict[str, type] = {}


def register_backend(cls: type) -> type:
    """Class decorator: make a backend available by its ``name``."""
    _BACKENDS[cls.name] = cls
    return cls


def get_backend(name: str) -> Backend:
    from ..errors import ConfigError

    if name not in _BACKENDS:
        # importing the built-in backends registers them
        from . import embedded  # noqa: F401
    try:
        return _BACKENDS[name]()
    except KeyError:
        raise ConfigError(f"unknown backend {name!r}", field="--backend",
                          fix=f"use one of: {', '.join(sorted(_BACKENDS))}") from None
