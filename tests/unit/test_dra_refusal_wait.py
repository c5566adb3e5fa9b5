"""A DRA pod the runtime keeps refusing is judged after the refusal grace, not at its wait's end (spec-dra S5.6)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from cci_conformance.dra.api import ContainerState, PodRefused, PodSpec, PodState, RefusalWatch
from cci_conformance.dra.kind_session import KindDraSession

NRI_ERROR = ('failed to create containerd container: failed to get NRI adjustment for container: rpc error: '
             'code = Unknown desc = claimUID "d266" already bound to pod "2c68" container "c0"')


def _pod(*waiting: str, running: bool = False) -> PodState:
    containers = tuple(ContainerState(f"c{i}", "", running, waiting=w) for i, w in enumerate(waiting))
    return PodState("p", "uid", "Running" if running else "Pending", containers)


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_refusal_ends_the_wait_only_once_it_outlasted_the_grace_and_is_seen_again():
    clock = _Clock()
    watch = RefusalWatch(30.0, clock)
    assert watch.settled(_pod("ContainerCreating: ")) is None  # on its way: nothing decided
    assert watch.settled(_pod("", f"CreateContainerError: {NRI_ERROR}")) is None  # the first refusal starts the grace
    clock.now = 29.9
    assert watch.settled(_pod("", f"CreateContainerError: {NRI_ERROR}")) is None
    clock.now = 40.0
    assert watch.settled(_pod("", "ContainerCreating: ")) is None  # a look between two attempts decides nothing
    clock.now = 41.0
    refused = _pod("", f"RunContainerError: {NRI_ERROR}")
    assert watch.settled(refused) is refused
    assert "container c1 refused for 30 s and more (RunContainerError: failed to create" in watch.describe()


def test_a_container_that_starts_within_the_grace_ends_the_wait_as_a_start():
    clock = _Clock()
    watch = RefusalWatch(30.0, clock)
    watch.settled(_pod(f"CreateContainerError: {NRI_ERROR}"))
    clock.now = 10.0
    running = _pod("", running=True)
    assert watch.settled(running) is running


@pytest.mark.parametrize("waiting", ["ContainerCreating: ", "CrashLoopBackOff: back-off 10s",
                                     "CreateContainerConfigError: secret missing", "ImagePullBackOff: x", ""])
def test_only_the_runtimes_refusals_count(waiting):
    clock = _Clock()
    watch = RefusalWatch(1.0, clock)
    for clock.now in (0.0, 5.0, 500.0):
        assert watch.settled(_pod(waiting)) is None


def test_no_grace_waits_out_the_whole_timeout():
    clock = _Clock()
    watch = RefusalWatch(None, clock)
    for clock.now in (0.0, 1000.0):
        assert watch.settled(_pod(f"CreateContainerError: {NRI_ERROR}")) is None


def _session(statuses):
    """A kind session whose API server answers the pod with ``statuses`` one read after another (the last repeats)."""
    reads = iter(statuses)
    last = {}

    def get(kind, name):
        last["status"] = next(reads, last.get("status"))
        return {"metadata": {"uid": "u1"}, "spec": {"containers": [{"name": "c0"}, {"name": "c1"}]},
                "status": {"phase": "Pending", "containerStatuses": last["status"]}}

    worker = SimpleNamespace(node="w1", api=object(), create=lambda *objects: None, pause=lambda: "pause:1",
                             get=get, pod_events=lambda name: [f"Failed: Error: {NRI_ERROR}"])
    return KindDraSession(None, worker, SimpleNamespace(topology=None, profile=None, device_mode="individual"),
                          "dra.cpu")


RUNNING = {"name": "c0", "containerID": "containerd://abc", "state": {"running": {"startedAt": "x"}}}
REFUSED = {"name": "c1", "state": {"waiting": {"reason": "CreateContainerError", "message": NRI_ERROR}}}


def test_create_pod_fails_a_refused_pod_with_the_kubelets_reason_after_the_grace():
    session = _session([[RUNNING, REFUSED]])
    with pytest.raises(PodRefused) as caught:
        session.create_pod(PodSpec("p"), timeout=30, refusal_grace=0.3)
    assert isinstance(caught.value, TimeoutError)  # a caller's "did not start" handling holds
    text = str(caught.value)
    assert "pod p will not start: container c1 refused for 0.3 s and more (CreateContainerError: failed" in text
    assert 'already bound to pod "2c68" container "c0"' in text and "events: ('Failed: Error:" in text


def test_create_pod_without_a_grace_waits_for_its_timeout_and_says_so():
    session = _session([[RUNNING, REFUSED]])
    with pytest.raises(TimeoutError) as caught:
        session.create_pod(PodSpec("p"), timeout=0.5, refusal_grace=None)
    assert not isinstance(caught.value, PodRefused)
    assert "timed out after 0.5s waiting for pod p running" in str(caught.value)


def test_create_pod_returns_the_pod_once_a_refused_container_starts():
    started = {**REFUSED, "containerID": "containerd://def", "state": {"running": {"startedAt": "y"}}}
    session = _session([[RUNNING, REFUSED], [RUNNING, REFUSED], [RUNNING, started]])
    pod = session.create_pod(PodSpec("p"), timeout=30, refusal_grace=20)
    assert pod.running and pod.container("c1").waiting == ""
