"""The kind DRA session's own logic, with kubectl and docker replaced by recorders."""

from __future__ import annotations

from types import SimpleNamespace

from cci_conformance.dra.kind_session import KindDraSession


class _Recorder:
    def __init__(self):
        self.calls: list[tuple] = []

    def kubectl(self, *args, **kwargs):
        self.calls.append(("kubectl", *args))
        return "{}"

    def delete(self, kind, *names, timeout=120):
        self.calls.append(("delete", kind, *names))

    def node_exec(self, *argv, timeout=60):
        self.calls.append(("exec", *argv))
        return "41"


def test_a_pod_deleted_while_the_kubelet_is_down_is_not_waited_for_until_it_is_back(monkeypatch):
    # a deletion is confirmed by the kubelet: waiting for it with the kubelet stopped would only time out
    rec = _Recorder()
    session = KindDraSession(rec, SimpleNamespace(node="w1", **{n: getattr(rec, n) for n in ("delete", "node_exec")}),
                             SimpleNamespace(topology=None, profile=None), "dra.cpu")
    session.cluster = rec
    monkeypatch.setattr(session, "_wait_kubelet", lambda old: rec.calls.append(("kubelet back", old)))
    session.stop_kubelet()
    session.delete_pod("gone")
    assert ("kubectl", "delete", "pod", "gone", "-n", "default", "--ignore-not-found", "--wait=false") in rec.calls
    assert not [c for c in rec.calls if c[0] == "delete"]
    session.start_kubelet()
    back = rec.calls.index(("kubelet back", "41"))
    assert rec.calls.index(("delete", "pod", "gone")) > back
    session.delete_pod("later")  # the kubelet is up: an ordinary, waited deletion
    assert rec.calls[-2] == ("delete", "pod", "later")
