"""The Go reference driver (drivers_under_test/go-reference) builds and agrees with the Python one.

It is certified from the installed wheel, built against the stubs the wheel ships
(tests/integration/test_installed_wheel.py): the one certification run of it in the tests."""

from __future__ import annotations

import shutil

import pytest

from cci_conformance.drivers.client import LocalDriver
from cci_conformance.drivers.manifest import load_manifest
from cci_conformance.paths import REFERENCE_DRIVER_DIR
from cci_conformance.topology import library

GO_DRIVER = REFERENCE_DRIVER_DIR.parent / "go-reference"
TOPOLOGY = "server-2s8c-smt2-intel"  # 2 NUMA nodes, SMT2: every capability of the driver can be exercised

pytestmark = [pytest.mark.integration, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("go") is None, reason="go is not on PATH: the Go reference driver "
                                 "cannot be built (install Go >= 1.24)")]

# (claim, whether a conforming driver admits it on an empty 2-node SMT2 machine): edge cases of S2.1-S2.10
# on which the two reference drivers were compared (issue 13).
CLAIMS = [
    ('{"cores":["2"],"cpu attributes":[[]]}', True),
    ('{"cores":["2"],"device attributes":[{"affinity":"NO-DEVICE-AFFINITY"}]}', True),
    ('{"cores":["02"]}', True),
    ('{"cores":[2]}', True),
    ('{"cores":[2.0]}', False),
    ('{"cores":[true]}', False),
    ('{"cores":["+2"]}', False),
    ('{"cores":[-2]}', False),
    ('{"cores":"2"}', False),
    ('{"cores":["2"],"cpu attributes":"EXCLUSIVE"}', False),
    ('{"cores":["2"],"mem attributes":[[]]}', False),
    ('{"cores":["2"],"mem attributes":[null]}', False),
    ('{"cores":["2"],"device attributes":[["NO-DEVICE-AFFINITY"]]}', False),
    ('{"cores":["2"],"device attributes":[{"affinity":"NUMA-DEVICE-AFFINITY-REQUIRED","device":"@DEV@","x":1}]}',
     False),
    ('{"cores":["2"],"device attributes":[{"affinity":"NUMA-DEVICE-AFFINITY-REQUIRED","device":"@DEVUP@"}]}', False),
    ('{"cores":["2"],"device attributes":[{"affinity":"NUMA-DEVICE-AFFINITY-PREFERRED","device":"0000:99:00.0"}]}',
     False),
    ('{"cores":["1-1"]}', True),
    ('{"cores":["0-2"]}', False),
    ('{"cores":["3-1"]}', False),
    ('{"cores":["3"],"cpu attributes":[["CORE-SIBLING-REQUIRED"]]}', False),
    ('{"cores":["1-3"],"cpu attributes":[["CORE-SIBLING-REQUIRED"]]}', True),
    ('{"cores":["1"],"mem attributes":["NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED"]}', False),
    ('{"cores":["2"],"cpu attributes":[["CORE-SIBLING-REQUIRED"]],'
     '"mem attributes":["NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED"]}', False),
    ('{"cores":["2"],"mem attributes":["NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED"],'
     '"device attributes":[{"affinity":"NUMA-DEVICE-AFFINITY-PREFERRED","device":"@DEV@"}]}', True),
    ('{"cores":["2"],"cpu attributes":[["SHARED","CORE-SIBLING-DENIED"]]}', False),
    ('{"cores":["2"]} x', False),
    ('', False),
    ('{}', False),
    ('{"cores":["33"]}', False),
    ('{"cores":["17"],"mem attributes":["NUMA-MEM-AFFINITY-BIND-REQUIRED"]}', False),
    ('{"cores":["16"],"cpu attributes":[["EXCLUSIVE","CORE-SIBLING-DENIED"]]}', True),
    ('{"cores":["17"],"cpu attributes":[["EXCLUSIVE","CORE-SIBLING-DENIED"]]}', False),
    ('{"cores":["2"],"cpu attributes":[["exclusive"]]}', False),
]
# S2.1 since issue 13: counts are ASCII digits. The Go driver refused these first; the Python reference's
# lenient int() admitted them until the spec decided (a finding of issue 13, resolved for every reader).
LENIENT_COUNTS = ['{"cores":[" 2"]}', '{"cores":["1 - 3"]}', '{"cores":["\uff11"]}']


def _admit_all(manifest_dir, claims):
    topology = library.load(TOPOLOGY)
    device = next(d.bdf for d in topology.pci_devices if d.numa_node == 1)
    with LocalDriver(load_manifest(manifest_dir), topology) as driver:
        out = []
        for i, claim in enumerate(claims):
            claim = claim.replace("@DEVUP@", device.upper()).replace("@DEV@", device)
            reply = driver.client.admit(pod=f"p{i}", container="c", claim_uid=f"u{i}", claim=claim,
                                        available=topology.online_cpus)
            out.append(reply.err)
            assert driver.client.remove(claim_uid=f"u{i}", container_id="").err == ""
        return out


def test_both_reference_drivers_admit_and_refuse_the_same_claims():
    claims = [c for c, _ in CLAIMS]
    expected = [admitted for _, admitted in CLAIMS]
    go = _admit_all(GO_DRIVER, claims)
    python = _admit_all(REFERENCE_DRIVER_DIR, claims)
    for claim, want, go_err, py_err in zip(claims, expected, go, python, strict=True):
        assert (go_err == "") == want, f"go-reference on {claim}: {go_err or 'admitted'}"
        assert (py_err == "") == want, f"python reference on {claim}: {py_err or 'admitted'}"
        if not want:
            assert "fix" in go_err or "cannot be placed" in go_err, go_err


def test_go_reference_refuses_counts_that_are_not_ascii_digits():
    errors = _admit_all(GO_DRIVER, LENIENT_COUNTS)
    assert all("`cores`[0]" in err for err in errors), errors


def test_python_reference_refuses_counts_that_are_not_ascii_digits():
    errors = _admit_all(REFERENCE_DRIVER_DIR, LENIENT_COUNTS)
    assert all("`cores`[0]" in err for err in errors), errors


def test_only_key_fields_are_required():
    # S1.3: namespace and claim_name label; pod, container and claim_uid key (both drivers agree since issue 13).
    from cci_conformance.protocol.protos import cci_v1alpha1_pb2 as pb

    for manifest_dir in (GO_DRIVER, REFERENCE_DRIVER_DIR):
        with LocalDriver(load_manifest(manifest_dir), library.load(TOPOLOGY)) as driver:
            stub, claim = driver.client.stub, '{"cores":["1"],"cpu attributes":[["EXCLUSIVE"]]}'
            ok = stub.CCIAdmit(pb.AdmitRequest(claim_uid="u", availableCpus="0-31", pod="p", container="c",
                                               resource_handle=claim), timeout=5)
            assert ok.err == "" and ok.rSet.cpuset, (manifest_dir.name, ok.err)
            no_pod = stub.CCIAdmit(pb.AdmitRequest(claim_uid="v", claim_name="v", availableCpus="0-31",
                                                   container="c", resource_handle=claim), timeout=5)
            assert no_pod.err, manifest_dir.name
            assert driver.client.add(pod="p", container="c", container_id="id").err == ""
            gone = stub.CCIRemoveContainerResource(pb.RemoveResourceRequest(claim_uid="u", container_id="id"),
                                                   timeout=5)
            assert gone.err == "", (manifest_dir.name, gone.err)
            again = driver.client.admit(pod="q", container="c", claim_uid="w", claim='{"cores":["32"]}',
                                        available="0-31")
            assert again.err == "", (manifest_dir.name, again.err)  # the Remove freed the CPU
