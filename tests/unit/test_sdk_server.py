"""The SDK's servers over real unix sockets, in-process: registration, err replies, serialisation, state."""

from __future__ import annotations

import io
import json
import shutil
import tempfile
from pathlib import Path

import grpc
import pytest

from cci_conformance.cpuset import parse_cpulist
from cci_conformance.driver_sdk import DriverRuntime, Policy, PolicyError, StructuredLog
from cci_conformance.driver_sdk.state import StateStore
from cci_conformance.protocol.protos import cci_v1alpha1_pb2 as pb
from cci_conformance.protocol.protos import cci_v1alpha1_pb2_grpc as pb_grpc
from cci_conformance.protocol.protos import pluginregistration_pb2 as reg_pb
from cci_conformance.protocol.protos import pluginregistration_pb2_grpc as reg_grpc
from cci_conformance.topology import library

TOPO = library.load("laptop-1s4c-smt2")  # 8 CPUs


class LowestFirst(Policy):
    """A trivial policy: the lowest usable CPUs; a claim of 7 CPUs triggers a bug, 6 a refusal."""

    capabilities = ("exclusive", "shared")

    def choose_cpus(self, claim, usable):
        out, free = [], sorted(usable)
        for g in claim.groups:
            if g.count == 7:
                raise ZeroDivisionError("policy bug")
            if g.count == 6:
                raise PolicyError("six is too many")
            if len(free) < g.count:
                raise PolicyError("not enough CPUs")
            out.append(frozenset(free[:g.count]))
            free = free[g.count:]
        return out


@pytest.fixture
def driver():
    root = Path(tempfile.mkdtemp(prefix="cci-", dir="/tmp"))
    log_stream = io.StringIO()
    runtime = DriverRuntime(LowestFirst(TOPO), "demo", root / "reg", root / "plugins" / "demo", root / "state",
                            StructuredLog("demo", log_stream))
    runtime.start()
    channel = grpc.insecure_channel(f"unix:{runtime.cci_socket}")
    stub = pb_grpc.CCIDriverStub(channel)
    yield runtime, stub, log_stream
    channel.close()
    runtime.stop()
    shutil.rmtree(root)


def admit(stub, pod, cores, exclusive=True, uid=None, available="0-7"):
    handle = json.dumps({"cores": [str(cores)], "cpu attributes": [["EXCLUSIVE" if exclusive else "SHARED"]]})
    return stub.CCIAdmit(pb.AdmitRequest(namespace="ns", claim_uid=uid or f"uid-{pod}", claim_name="c",
                                         availableCpus=available, pod=pod, container="ctr",
                                         resource_handle=handle), timeout=5)


def test_registration_answers_get_info(driver):
    runtime, _, _ = driver
    with grpc.insecure_channel(f"unix:{runtime.reg_socket}") as ch:
        info = reg_grpc.RegistrationStub(ch).GetInfo(reg_pb.InfoRequest(), timeout=5)
        assert (info.type, info.name, info.endpoint, list(info.supported_versions)) == (
            "CCIPlugin", "demo", str(runtime.cci_socket), ["v1alpha1"])
        reg_grpc.RegistrationStub(ch).NotifyRegistrationStatus(
            reg_pb.RegistrationStatus(plugin_registered=True), timeout=5)
    assert runtime.reg_socket.name == "demo-reg.sock" and runtime.cci_socket.name == "cci.sock"


def test_policy_exception_becomes_err_and_server_survives(driver):
    runtime, stub, log = driver
    reply = admit(stub, "p1", 7)
    assert "internal driver error" in reply.err and "ZeroDivisionError" in reply.err
    assert not reply.HasField("rSet") and not reply.groups
    assert '"event":"admit_failed"' in log.getvalue()
    ok = admit(stub, "p2", 2)
    assert ok.err == "" and ok.rSet.cpuset == "0-1"


def test_refusals_leave_no_trace(driver):
    runtime, stub, _ = driver
    assert admit(stub, "p1", 6).err == "six is too many"
    assert "not a number" in stub.CCIAdmit(pb.AdmitRequest(pod="p1", container="c", claim_uid="u",
                                                           availableCpus="0-7", resource_handle='{"cores":["x"]}'),
                                           timeout=5).err
    assert "availableCpus" in stub.CCIAdmit(pb.AdmitRequest(pod="p1", container="c", claim_uid="u",
                                                            availableCpus="zero", resource_handle="{}"),
                                            timeout=5).err
    assert runtime.policy.admissions == {}
    assert not runtime.store.path.exists()
    assert admit(stub, "p1", 2).rSet.cpuset == "0-1"


def test_admit_is_idempotent_and_exclusive_cpus_are_never_regranted(driver):
    runtime, stub, _ = driver
    first = admit(stub, "p1", 2)
    again = admit(stub, "p1", 2)
    assert again.rSet == first.rSet and list(again.groups) == list(first.groups)
    assert "already admitted" in admit(stub, "p1", 2, uid="other").err
    # availableCpus wrongly still lists 0-1: the driver must not hand them out again
    second = admit(stub, "p2", 2)
    assert parse_cpulist(second.rSet.cpuset).isdisjoint(parse_cpulist(first.rSet.cpuset))
    shared = admit(stub, "p3", 2, exclusive=False)
    assert parse_cpulist(shared.rSet.cpuset).isdisjoint(parse_cpulist(first.rSet.cpuset))
    assert shared.rSet.exclusive is False


def test_add_and_remove(driver):
    runtime, stub, _ = driver
    first = admit(stub, "p1", 2)
    assert "never admitted" in stub.CCIAddContainerResource(
        pb.AddResourceRequest(pod="nope", container="ctr", container_id="cid"), timeout=5).err
    add = pb.AddResourceRequest(cgroup="/kubepods/p1", pod="p1", container="ctr", container_id="cid-1")
    assert stub.CCIAddContainerResource(add, timeout=5).err == ""
    assert stub.CCIAddContainerResource(add, timeout=5).err == ""  # repeated Add: no change
    assert runtime.policy.admissions[("p1", "ctr")].container_id == "cid-1"
    wrong = pb.RemoveResourceRequest(namespace="ns", claim_uid="someone-else", claim_name="c", container_id="cid-1")
    assert "holds claim" in stub.CCIRemoveContainerResource(wrong, timeout=5).err
    rm = pb.RemoveResourceRequest(namespace="ns", claim_uid="uid-p1", claim_name="c", container_id="cid-1")
    assert stub.CCIRemoveContainerResource(rm, timeout=5).err == ""
    assert stub.CCIRemoveContainerResource(rm, timeout=5).err == ""  # idempotent
    assert runtime.policy.admissions == {}
    assert admit(stub, "p2", 2).rSet.cpuset == first.rSet.cpuset  # freed CPUs come back


def test_remove_without_container_id_releases_unadded_admissions(driver):
    runtime, stub, _ = driver
    admit(stub, "p1", 2, uid="claim-a")
    rm = pb.RemoveResourceRequest(namespace="ns", claim_uid="claim-a", claim_name="c", container_id="")
    assert stub.CCIRemoveContainerResource(rm, timeout=5).err == ""
    assert runtime.policy.admissions == {}


def test_state_is_saved_after_every_change_and_restored(driver):
    runtime, stub, _ = driver
    admit(stub, "p1", 2)
    admit(stub, "p2", 3, exclusive=False)
    data = StateStore(runtime.store.path.parent).load()
    assert len(data) == 2  # one entry per admission
    fresh = LowestFirst(TOPO)
    fresh.restore_entries(data)
    assert fresh.admissions.keys() == runtime.policy.admissions.keys()
    assert fresh.withheld_now() == frozenset({0, 1})


def test_stop_removes_both_sockets(driver):
    runtime, _, _ = driver
    assert runtime.reg_socket.exists() and runtime.cci_socket.exists()
    runtime.stop()
    assert not runtime.reg_socket.exists() and not runtime.cci_socket.exists()
