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
