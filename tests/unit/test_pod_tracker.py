"""The ``pods`` fixture's tracker: each session's pods deleted together, newest first, problems named by pod."""

from __future__ import annotations

import sys

from cci_conformance.node.api import AdmissionResult, ContainerSpec, PodSpec
from cci_conformance.paths import PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "fixtures"))
from pods import PodTracker  # noqa: E402


class Session:
    def __init__(self, batch_fails: bool = False, stuck: str = ""):
        self.batches: list[list[str]] = []
        self.single: list[str] = []
        self.batch_fails, self.stuck = batch_fails, stuck

    def create_pod(self, pod, *, settle=True):
        return AdmissionResult(True)

    def delete_pods(self, uids):
        self.batches.append(list(uids))
        if self.batch_fails:
            raise RuntimeError("the release timed out")

    def delete_pod(self, uid):
        self.single.append(uid)
        if uid == self.stuck:
            raise RuntimeError("never released")


def pod(uid: str) -> PodSpec:
    return PodSpec("default", uid, uid, (ContainerSpec("c0"),))


def test_each_sessions_pods_go_in_one_batch_newest_first():
    a, b = Session(), Session()
    tracker = PodTracker(a)
    for uid, where in (("p1", a), ("p2", a), ("q1", b), ("p3", a)):
        tracker.create(pod(uid), session=where)
    assert tracker.cleanup() == []
    assert a.batches == [["p3"], ["p2", "p1"]] and b.batches == [["q1"]] and not a.single


def test_a_failed_batch_is_retried_pod_by_pod_and_the_stuck_one_named():
    s = Session(batch_fails=True, stuck="p1")
    tracker = PodTracker(s)
    for uid in ("p1", "p2"):
        tracker.create(pod(uid))
    problems = tracker.cleanup()
    assert s.single == ["p2", "p1"] and len(problems) == 1 and problems[0].startswith("pod p1: never released")
