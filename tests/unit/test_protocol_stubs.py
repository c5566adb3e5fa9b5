"""The checked-in protocol stubs are exactly what regenerating them from the .proto files gives."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from cci_conformance.protocol import generate

pytest.importorskip("grpc_tools")

STUB_DIR = Path(generate.__file__).parent / "protos"


def test_regenerating_the_stubs_changes_nothing():
    out = Path(tempfile.mkdtemp(prefix="cci-stubs-", dir="/tmp"))
    try:
        written = generate.generate(out)
        names = sorted(p.name for p in written)
        checked_in = sorted(p.name for p in STUB_DIR.glob("*_pb2*.py*"))
        assert names == checked_in
        for path in written:
            assert path.read_bytes() == (STUB_DIR / path.name).read_bytes(), f"{path.name} differs; run " \
                "python -m cci_conformance.protocol.generate and commit the result"
    finally:
        shutil.rmtree(out)


def test_full_method_names_are_the_documented_ones():
    from cci_conformance.protocol.protos import cci_v1alpha1_pb2 as pb
    from cci_conformance.protocol.protos import pluginregistration_pb2 as reg
    from cci_conformance.protocol.protos import podresources_v1_pb2 as pr

    cci = pb.DESCRIPTOR.services_by_name["CCIDriver"]
    assert cci.full_name == "cci.v1alpha1.CCIDriver"
    assert [m.name for m in cci.methods] == ["CCIAdmit", "CCIAddContainerResource", "CCIRemoveContainerResource"]
    assert reg.DESCRIPTOR.services_by_name["Registration"].full_name == "pluginregistration.Registration"
    lister = pr.DESCRIPTOR.services_by_name["PodResourcesLister"]
    assert lister.full_name == "v1.PodResourcesLister"
    assert [m.name for m in lister.methods] == ["List", "GetAllocatableResources", "Get"]


@pytest.mark.parametrize("message, fields", [
    ("AdmitRequest", {"namespace": 1, "claim_uid": 2, "claim_name": 3, "availableCpus": 4, "pod": 5,
                      "container": 6, "resource_handle": 7}),
    ("ResourceSet", {"cpuset": 1, "exclusive": 2}),
    ("AdmitResponse", {"rSet": 1, "err": 2, "groups": 3}),
    ("AddResourceRequest", {"cgroup": 1, "pod": 2, "container": 3, "container_id": 4}),
    ("AddResourceResponse", {"err": 1}),
    ("RemoveResourceRequest", {"namespace": 1, "claim_uid": 2, "claim_name": 3, "container_id": 4}),
    ("RemoveResourceResponse", {"err": 1}),
])
def test_cci_field_numbers_follow_the_kep(message, fields):
    from cci_conformance.protocol.protos import cci_v1alpha1_pb2 as pb

    desc = pb.DESCRIPTOR.message_types_by_name[message]
    assert {f.name: f.number for f in desc.fields} == fields


def test_pod_resources_field_numbers_follow_upstream():
    from cci_conformance.protocol.protos import podresources_v1_pb2 as pr

    def numbers(name):
        return {f.name: f.number for f in pr.DESCRIPTOR.message_types_by_name[name].fields}

    assert numbers("ContainerResources") == {"name": 1, "devices": 2, "cpu_ids": 3, "memory": 4,
                                             "dynamic_resources": 5}
    assert numbers("AllocatableResourcesResponse") == {"devices": 1, "cpu_ids": 2, "memory": 3}
    assert numbers("DynamicResource") == {"claim_name": 2, "claim_namespace": 3, "claim_resources": 4}
    assert numbers("ClaimResource") == {"cdi_devices": 1, "driver_name": 2, "pool_name": 3, "device_name": 4}
    assert numbers("GetPodResourcesRequest") == {"pod_name": 1, "pod_namespace": 2}
