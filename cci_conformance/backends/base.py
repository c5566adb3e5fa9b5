"""The small protocol every backend implements: realise a node with a driver, and observe it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol

from ..cpuset import CPUs
from ..node.api import AdmissionResult, NodeSnapshot, PersistedState, PodSpec
from ..topology.model import Topology


@dataclass(frozen=True)
class SessionConfig:
    """What a suite asks for: a machine, a node profile, a driver, and a scratch directory."""

    topology: Topology
    node_profile: dict  # parsed node profile (schema: cci_conformance/node/profile.py)
    driver_manifest: Path | None  # None = a node without a CCI driver
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)


# The hooks a backend may not be able to offer, and what each lets a suite do. A session lists the ones it
# offers in ``features``; a test needing another is not-applicable on that backend, with this text in the
# reason (certify/outcomes.py require_feature). A test never probes a session with hasattr: a hook it has
# but does not list is not offered.
FEATURES = {
    "node-stop": "stop_node()/start_node(): the node down while the runtime and the driver go on",
    "driver-pause": "pause_driver()/resume_driver(): hold the driver mid-answer (SIGSTOP/SIGCONT)",
    # the endpoint the driver advertised in its registration, as the node accepted it (not where the backend put it)
    "cci-endpoint": "cci_endpoint(): dial the driver's CCI socket directly, for calls the node never sends",
    # KEP-3675's alpha takes claims through DRA, whose opaque device config is a JSON object (the API server
    # refuses anything else), so on a real kubelet a driver never receives other parameters.
    "raw-parameters": "create_pod(): hand the driver claim parameters that are not a JSON object",
}


class NodeFault(RuntimeError):
    """The node failed where no driver takes part (e.g. the container runtime never started an admitted pod's
    sandbox): the test proves nothing about the driver, so it is reported untested, never a pass or a fail
    (docs/spec.md 4.2). Raise it only where the driver provably had no hand in the failure."""


class NodeStartFailed(RuntimeError):
    """The backend could not bring the run's node or its driver up at all, so every later session would fail the
    same way: the run stops with this one message (certify/early_stop.py), as the startup probe stops it before
    the first test. ``driver_at_fault``: the driver did not register (REG-001 fails), not the node."""

    def __init__(self, message: str, driver_at_fault: bool):
        super().__init__(message)
        self.driver_at_fault = driver_at_fault


class ContractError(TypeError):
    """A session that does not say what the contract asks of every backend (its name, its features)."""


def missing_feature(session, feature: str) -> str:
    """"" when ``session`` offers ``feature``; otherwise the not-applicable reason naming the backend."""
    if feature not in FEATURES:
        raise ValueError(f"unknown backend feature {feature!r}; known: {sorted(FEATURES)}")
    for attr in ("backend_name", "features"):
        if not hasattr(session, attr):  # a forgotten declaration must not quietly waive requirements
            raise ContractError(f"{type(session).__name__} has no {attr!r}: every NodeSession declares "
                                "backend_name and features (backends/base.py)")
    if feature in session.features:
        return ""
    return f"backend {session.backend_name} cannot {FEATURES[feature].split(': ', 1)[1]} ({feature})"


class NodeSession(Protocol):
    """One running node with its driver. Every call has a deadline; close() leaves nothing behind.

    This is the only way suites and their fixtures look at a node (docs/architecture.md "The contract").
    What they read is typed: NodeSnapshot and PersistedState (node/api.py) refuse a missing or mistyped
    field when they are made, so a backend that cannot supply something fails loudly, never by default.
    """

    topology: Topology
    backend_name: str
    features: frozenset[str]  # the keys of FEATURES this session offers
    # A fact, not a hook: the node learns its pods from an API server (a real kubelet), so a pod whose admission
    # a restart interrupted may be admitted afresh once the driver is back (docs/spec.md S3.9); the embedded
    # node has no API server and brings no pod back.
    pods_from_api_server: bool

    def create_pod(self, pod: PodSpec, *, settle: bool = True) -> AdmissionResult: ...
    # settle=False: return once the node admitted the pod (or refused it) and the runtime runs it, without
    # waiting for the shared containers' cpusets to follow the new pool (a real kubelet's reconcile loop, up to
    # its period later); the result's runtime cpusets may then be the old ones. For many-pod tests that judge
    # admissions, not cpusets (the latency fill, ROBUST-003). The embedded node is settled at once either way.
    def create_pods(self, pods: Sequence[PodSpec], *, settle: bool = True,
                    overlap: bool = False) -> list[AdmissionResult]: ...
    # create_pod for each, in order, the next once the node finished admitting the one before (a real kubelet
    # admits one pod at a time), without waiting for each to run; each result as create_pod gives it. overlap:
    # a node may take the next pods while earlier ones still start (kind: a few created ahead), for tests that
    # judge calls against a deadline; a latency budget's samples need the host quiet around each admission
    def delete_pod(self, pod_uid: str) -> None: ...
    def delete_pods(self, pod_uids: Sequence[str]) -> None: ...  # each as delete_pod, in that order where the
    # node deletes one at a time; a real kubelet is asked for all at once and they are awaited together
    def stop_container(self, pod_uid: str, container: str) -> None: ...
    def snapshot(self) -> NodeSnapshot: ...  # the ledger at one instant, read through the node (waits for
    # an admission in progress to end)

    def restart_node(self, hard: bool = True) -> None: ...
    def restart_driver(self, hard: bool = True) -> None: ...
    def stop_driver(self, hard: bool = True) -> None: ...
    def start_driver(self) -> None: ...
    def remove_container_behind_node(self, pod_uid: str, container: str) -> None: ...  # the runtime drops a
    # container while the node is down (as containerd would after the container exits); the node must
    # reconcile it at its next start

    # Offered when listed in ``features`` (FEATURES says what each is for); otherwise they raise NotImplementedError.
    def stop_node(self, hard: bool = True) -> int | None: ...
    def start_node(self) -> None: ...
    def pause_driver(self) -> None: ...
    def resume_driver(self) -> None: ...
    def cci_endpoint(self) -> Path: ...

    def allocatable_cpus(self) -> CPUs: ...  # pod-resources GetAllocatableResources
    def listed_exclusive_cpus(self) -> dict[str, CPUs]: ...  # pod-resources List: "<ns>/<pod>/<container>" -> cpu_ids
    def persisted_state(self) -> PersistedState: ...  # the checkpoints on disk, read without the node
    # (node/persisted.py builds it from the files both nodes write; the kind backend reads them from the
    # node container)
    def collect_evidence(self, dest: Path) -> list[Path]: ...  # logs, state files, cpusets
    def close(self) -> None: ...


class Backend(Protocol):
    name: ClassVar[str]

    def prepare(self, groups: tuple[tuple[Topology, ...], ...]) -> None: ...  # every machine the run will open
    # sessions on, told before the first open (a backend that builds its machines up front, like kind, needs
    # them), grouped: a run topology first, then the machines its tests open beside it (LAT-004's growth machines)
    def open(self, config: SessionConfig) -> NodeSession: ...
    def run_facts(self) -> dict: ...  # what the run ran on, for report.json run.backend_facts ({} when nothing)
    def finish(self) -> None: ...  # at the end of each pytest process: release what the run built (kind: the
    # clusters of this process, and those of pytest-xdist workers that ended before they could delete theirs)

