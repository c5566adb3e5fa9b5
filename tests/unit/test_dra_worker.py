"""The kind worker's reads that need no cluster: the driver's ResourceSlices, the objects it applies."""

from __future__ import annotations

import json
from types import SimpleNamespace

from cci_conformance.dra.deployment import DriverDeployment
from cci_conformance.dra.worker import Worker, published_devices


def test_slices_are_read_per_node_and_driver_with_typed_values():
    attributes = {"dra.cpu/cpuID": {"int": 4}, "dra.cpu/smtEnabled": {"bool": True}, "model": {"string": "x"}}
    mine = [{"name": "cpudev000", "attributes": attributes}]
    slices = [{"spec": {"driver": "dra.cpu", "nodeName": "w", "devices": mine}},
              {"spec": {"driver": "other", "nodeName": "w", "devices": [{"name": "x", "attributes": {}}]}},
              {"spec": {"driver": "dra.cpu", "nodeName": "w2", "devices": [{"name": "y", "attributes": {}}]}}]
    assert published_devices(slices, "w", "dra.cpu") == {
        "cpudev000": {"dra.cpu/cpuID": 4, "dra.cpu/smtEnabled": True, "model": "x"}}
    assert published_devices(slices, "w", "other") == {"x": {}}


def test_objects_are_applied_as_one_list_and_slices_read_for_the_deployments_driver():
    sent = []

    def kubectl(*args, stdin=None, **kwargs):
        sent.append((args, stdin))
        return json.dumps({"items": [{"spec": {"driver": "d.example", "nodeName": "w", "devices": [
            {"name": "cpu-0", "attributes": {"cpuID": {"int": 0}}}]}}]})
    worker = Worker(SimpleNamespace(kubectl=kubectl), "w", DriverDeployment("img:1", "w", driver_name="d.example"))
    worker.apply({"kind": "A"}, {"kind": "B"})
    args, stdin = sent[0]
    assert args == ("apply", "-f", "-") and json.loads(stdin) == {"apiVersion": "v1", "kind": "List",
                                                                  "items": [{"kind": "A"}, {"kind": "B"}]}
    assert worker.published() == {"cpu-0": {"cpuID": 0}}
    assert sent[1][0] == ("get", "resourceslices", "-o", "json")


class _API:
    """A KubeAPI stand-in: objects by (kind, name); create refuses an existing one with 409, as the server does."""

    def __init__(self):
        self.objects: dict[tuple[str, str], dict] = {}
        self.calls: list[tuple] = []

    def create(self, obj):
        from cci_conformance.kind.cluster.kube_api import KubeAPIError

        key = (obj["kind"].lower() + "s", obj["metadata"]["name"])
        self.calls.append(("create", *key))
        if key in self.objects:
            raise KubeAPIError(409, "already exists")
        self.objects[key] = obj

    def read(self, kind, name="", namespace="default"):
        from cci_conformance.kind.cluster.kube_api import KubeAPIError

        plural = kind if kind.endswith("s") else kind + "s"
        if not name:
            return {"items": [o for (k, _), o in self.objects.items() if k == plural]}
        if (plural, name) not in self.objects:
            raise KubeAPIError(404, "not found")
        return self.objects[(plural, name)]

    def delete(self, kind, name, namespace="default"):
        self.calls.append(("delete", kind, name))
        self.objects.pop((kind if kind.endswith("s") else kind + "s", name), None)


def test_with_an_api_client_objects_are_created_read_and_deleted_without_kubectl():
    applied = []
    api = _API()
    cluster = SimpleNamespace(kubectl=lambda *args, stdin=None, **kw: applied.append(json.loads(stdin)["items"]))
    worker = Worker(cluster, "w", DriverDeployment("img:1", "w"), api=api)
    claim = {"kind": "ResourceClaim", "metadata": {"name": "p-c"}}
    pod = {"kind": "Pod", "metadata": {"name": "p"}}
    worker.create(claim, pod)
    assert worker.find("pod", "p") is pod and worker.find("pod", "q") is None and not applied
    worker.create(dict(claim, spec={"x": 1}))  # exists: updated by kubectl apply, as before the API path
    assert applied == [[dict(claim, spec={"x": 1})]]
    worker.delete("pod", "p", "q", timeout=5)  # returns once neither exists; a missing one is no error
    assert worker.find("pod", "p") is None and ("delete", "pod", "q") in api.calls
