"""Differential check: one pod sequence on a real kubelet and on our static CPU manager, state files compared.

The same steps drive the library (``run_on_model``) and the embedded node process (``run_on_embedded``).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..node.api import ContainerSpec, PodSpec
from ..node.cpumanager import CPUManagerState, SMTAlignmentError, StaticPolicy, dumps, from_model
from ..node.profile import NodeConfig
from ..topology.model import Topology
from ..waiting import wait_for
from .cluster import pods
from .cluster.lifecycle import KindCluster
from .cluster.node_access import NodeAccess


@dataclass(frozen=True)
class Step:
    """Create pod ``name`` with ``containers`` (cpu request, cpu limit), or delete it when containers is None."""

    name: str
    containers: tuple[tuple[str | None, str | None], ...] | None = None

    @property
    def is_delete(self) -> bool:
        return self.containers is None

    def pod(self, uid: str) -> PodSpec:
        specs = []
        for i, (request, limit) in enumerate(self.containers or ()):
            # Memory request = limit whenever the CPU is, so the QoS class follows the CPU fields alone.
            memory = "16Mi" if request is not None and request == limit else None
            specs.append(ContainerSpec(f"c{i}", request, limit, memory, memory))
        return PodSpec(pods.NAMESPACE, self.name, uid, tuple(specs))


def g(*cpus: str) -> tuple[tuple[str, str], ...]:
    """Containers of a Guaranteed pod (request = limit)."""
    return tuple((c, c) for c in cpus)


@dataclass
class Observation:
    """What one side produced after each step: the state file bytes and each pod's admission outcome."""

    states: list[bytes] = field(default_factory=list)
    outcomes: dict[str, str] = field(default_factory=dict)  # pod -> "admitted" | "SMTAlignmentError" | ...


def run_on_kubelet(cluster: KindCluster, node: str, steps: list[Step]) -> tuple[Observation, dict[str, str]]:
    """Apply the steps on ``node``; returns the observation and the pod UIDs the API server gave."""
    access = NodeAccess(node)
    image = pods.pause_image(cluster, node)
    uids: dict[str, str] = {}
    seen = Observation()
    for step in steps:
        if step.is_delete:
            pods.delete(cluster, step.name)
            uid = uids[step.name]
            # The kubelet drops the assignment when the container is removed; wait for the file to say so.
            wait_for(lambda uid=uid: uid not in access.cpu_manager_state().entries, timeout=60, interval=0.5,
                     what=f"kubelet to release the CPUs of {step.name}")
        else:
            admitted = pods.create_and_wait(cluster, step.pod(""), node, image)
            uids[step.name] = admitted.uid
            seen.outcomes[step.name] = "admitted" if admitted.phase == "Running" else admitted.reason
        seen.states.append(access.state_bytes())
    return seen, uids


def run_on_model(topology: Topology, profile: NodeConfig, steps: list[Step], uids: dict[str, str]) -> Observation:
    """Apply the same steps to the harness's StaticPolicy, as the kubelet's Allocate/RemoveContainer would."""
    options = {name: "true" if on else "false" for name, on in profile.options.items()}
    policy = StaticPolicy(from_model(topology), profile.reserved, options)
    state: CPUManagerState = policy.initial_state()
    seen = Observation()
    for step in steps:
        pod = step.pod(uids.get(step.name, ""))
        if step.is_delete:
            for container in list(state.entries.get(pod.uid, {})):
                policy.release(state, pod.uid, container)
        else:
            outcome = "admitted"
            trial = state.copy()
            try:
                for container in pod.containers:
                    policy.allocate(trial, pod, container)
                state = trial
            except SMTAlignmentError:
                outcome = "SMTAlignmentError"
            seen.outcomes[step.name] = outcome
        seen.states.append(dumps(state))
    return seen


def run_on_embedded(topology: Topology, profile: dict, steps: list[Step], uids: dict[str, str]) -> Observation:
    """Apply the same steps to the embedded node process (no driver) and read the state file it wrote."""
    from ..backends.base import SessionConfig
    from ..backends.embedded import EmbeddedBackend

    workdir = Path(tempfile.mkdtemp(prefix="cci-", dir="/tmp"))  # short: unix sockets live here
    session = EmbeddedBackend().open(SessionConfig(topology, profile, None, workdir))
    seen = Observation()
    try:
        for step in steps:
            uid = uids.get(step.name, "")
            if step.is_delete:
                session.delete_pod(uid)
            else:
                result = session.create_pod(step.pod(uid))
                seen.outcomes[step.name] = "admitted" if result.admitted else result.reason
            seen.states.append(session.state_files().get("cpu_manager_state", b""))
    finally:
        session.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return seen


def first_difference(steps: list[Step], real: Observation, model: Observation, label: str = "ours") -> str | None:
    """A precise report of the first step where the two sides differ, or None when they agree throughout."""
    if real.outcomes != model.outcomes:
        diff = {k: (real.outcomes.get(k), model.outcomes.get(k)) for k in real.outcomes
                if real.outcomes.get(k) != model.outcomes.get(k)}
        return f"admission outcomes differ (kubelet, {label}): {diff}"
    for i, (step, mine, theirs) in enumerate(zip(steps, model.states, real.states, strict=True)):
        if mine != theirs:
            action = "delete" if step.is_delete else f"create {step.containers}"
            return (f"after step {i} ({action} {step.name}):\n  kubelet: {theirs.decode()}\n"
                    f"  {label}: {mine.decode()}")
    return None
