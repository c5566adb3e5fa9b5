"""The kubelet's DRA checkpoint and histograms, and the objects of a PodSpec, as the kind DRA session reads them."""

from __future__ import annotations

import json
import zlib

import pytest

from cci_conformance.dra import kubelet_state
from cci_conformance.dra.api import ClaimSpec, ContainerSpec, Histogram, PodSpec
from cci_conformance.dra.objects import pod_objects

CLAIMS = [{"ClaimUID": "u1", "ClaimName": "held-c0", "Namespace": "default", "PodUIDs": {"p1": {}},
           "DriverState": {"dra.cpu": {"Devices": [{"PoolName": "w", "DeviceName": "cpu2", "RequestNames": ["cpus"]},
                                                   {"PoolName": "w", "DeviceName": "cpu3"}]}}}]


def checkpoint(claims, checksum=None) -> str:
    data = json.dumps({"kind": "DRACheckpoint", "apiVersion": "checkpoint.dra.kubelet.k8s.io/v1",
                       "ClaimInfoStateList": claims})
    return json.dumps({"Data": data, "Checksum": zlib.crc32(data.encode()) if checksum is None else checksum})


def test_dra_checkpoint_is_read_with_its_checksum():
    (claim,) = kubelet_state.prepared_claims(checkpoint(CLAIMS))
    assert (claim.claim_name, claim.namespace, claim.pod_uids) == ("held-c0", "default", frozenset({"p1"}))
    assert claim.devices == (("dra.cpu", "w", "cpu2"), ("dra.cpu", "w", "cpu3"))
    assert kubelet_state.prepared_claims("") == ()
    with pytest.raises(kubelet_state.CheckpointError, match="checksum"):
        kubelet_state.prepared_claims(checkpoint(CLAIMS, checksum=1))


OK = 'driver_name="dra.cpu",grpc_status_code="OK",method_name="/v1.DRAPlugin/NodePrepareResources"'
DOWN = 'driver_name="dra.cpu",grpc_status_code="Unavailable",method_name="/v1.DRAPlugin/NodePrepareResources"'
GRPC, POD = "dra_grpc_operations_duration_seconds", "dra_operations_duration_seconds"
PREP = 'is_error="false",operation_name="PrepareResources"'
METRICS = "\n".join([
    f"# TYPE {GRPC} histogram",
    f'{GRPC}_bucket{{{OK},le="0.1"}} 98', f'{GRPC}_bucket{{{OK},le="0.1536"}} 100',
    f'{GRPC}_bucket{{{OK},le="+Inf"}} 100',
    f"{GRPC}_sum{{{OK}}} 3.5", f"{GRPC}_count{{{OK}}} 100",
    f'{GRPC}_bucket{{{DOWN},le="+Inf"}} 7', f"{GRPC}_count{{{DOWN}}} 7",
    f"# TYPE {POD} histogram",
    f'{POD}_bucket{{{PREP},le="0.1"}} 5', f'{POD}_bucket{{{PREP},le="+Inf"}} 6', f"{POD}_count{{{PREP}}} 6",
    f"{POD}_sum{{{PREP}}} 0.4", ""])


def test_prepare_histograms_count_successful_calls_of_this_driver_only():
    m = kubelet_state.metrics(METRICS, "dra.cpu")
    assert m.node_prepare.count == 100 and m.node_prepare.quantile_bound(0.5) == 0.1
    assert m.node_prepare.quantile_bound(0.99) == 0.1536  # 98 of 100 within 100 ms: p99 is in the next bucket
    assert m.prepare_resources.count == 6
    assert kubelet_state.metrics(METRICS, "other.driver").node_prepare.count == 0


def test_histogram_difference_is_what_happened_since():
    before = Histogram("h", ((0.1, 10), (float("inf"), 10)), 10, 0.5)
    after = Histogram("h", ((0.1, 15), (float("inf"), 20)), 20, 2.0)
    assert after.minus(before) == Histogram("h", ((0.1, 5), (float("inf"), 10)), 10, 1.5)
    assert Histogram("h", (), 0, 0.0).quantile_bound(0.99) is None


def test_pod_objects_carry_claims_templates_selectors_and_guaranteed_requests():
    spec = PodSpec("p", (ContainerSpec("c0", ("a",)), ContainerSpec("c1", ("a", "t")), ContainerSpec("g", (), 2)),
                   (ClaimSpec("a", 2, numa_node=1), ClaimSpec("t", 1, socket=0, template=True)))
    claim, template, pod = pod_objects(spec, "w", "pause:1", "dra.cpu")
    assert claim["kind"] == "ResourceClaim" and template["kind"] == "ResourceClaimTemplate"
    exactly = claim["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["count"] == 2 and "numaNodeID == 1" in exactly["selectors"][0]["cel"]["expression"]
    assert "socketID == 0" in template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0]["cel"][
        "expression"]
    assert pod["spec"]["resourceClaims"] == [{"name": "a", "resourceClaimName": "a"},
                                             {"name": "t", "resourceClaimTemplateName": "t"}]
    c0, c1, g = pod["spec"]["containers"]
    assert c0["resources"] == {"claims": [{"name": "a"}]} and len(c1["resources"]["claims"]) == 2
    assert g["resources"]["requests"] == g["resources"]["limits"] == {"cpu": "2", "memory": "64Mi"}
    assert pod["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "w"} and "nodeName" not in pod["spec"]


def test_a_container_on_an_unknown_claim_is_refused():
    with pytest.raises(ValueError, match="unknown claims"):
        PodSpec("p", (ContainerSpec("c0", ("nope",)),))
