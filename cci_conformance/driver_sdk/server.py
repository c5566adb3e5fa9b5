"""gRPC servicers for registration and CCIDriver: serialised calls, every failure an ``err`` reply."""

from __future__ import annotations

import threading
import time
from concurrent import futures
from pathlib import Path

import grpc

from ..cpuset import CPUListError, format_cpulist, parse_cpulist
from ..protocol.claims import ClaimError
from ..protocol.protos import cci_v1alpha1_pb2 as pb
from ..protocol.protos import cci_v1alpha1_pb2_grpc as pb_grpc
from ..protocol.protos import pluginregistration_pb2 as reg_pb
from ..protocol.protos import pluginregistration_pb2_grpc as reg_grpc
from .log import StructuredLog
from .policy import Admission, AdmitCall, Policy, PolicyError
from .state import StateStore

PLUGIN_TYPE = "CCIPlugin"
SUPPORTED_VERSIONS = ("v1alpha1",)
MAX_SOCKET_PATH = 107  # sockaddr_un.sun_path holds 108 bytes including the terminating NUL


class RegistrationServicer(reg_grpc.RegistrationServicer):
    """pluginregistration.Registration for the kubelet's plugin watcher (docs/spec.md S1.2)."""

    def __init__(self, name: str, endpoint: Path, log: StructuredLog):
        self.name, self.endpoint, self.log = name, endpoint, log
        self.status: tuple[bool, str] | None = None

    def GetInfo(self, request, context):  # noqa: N802 - gRPC method name
        return reg_pb.PluginInfo(type=PLUGIN_TYPE, name=self.name, endpoint=str(self.endpoint),
                                 supported_versions=list(SUPPORTED_VERSIONS))

    def NotifyRegistrationStatus(self, request, context):  # noqa: N802
        self.status = (request.plugin_registered, request.error)
        self.log.info("registration_status", registered=request.plugin_registered, error=request.error)
        return reg_pb.RegistrationStatusResponse()


class CCIServicer(pb_grpc.CCIDriverServicer):
    """cci.v1alpha1.CCIDriver over a Policy; one call at a time; state saved after every change."""

    def __init__(self, policy: Policy, store: StateStore, log: StructuredLog):
        self.policy, self.store, self.log = policy, store, log
        self._lock = threading.Lock()

    def _mutate(self, what: str, fn, fields: dict):
        """Run ``fn`` under the lock; persist a change; on any failure restore the previous state."""
        start = time.perf_counter()
        with self._lock:
            before = self.policy.checkpoint()
            try:
                result = fn()
                put, deleted = self.policy.entry_changes(before)
                if put or deleted:
                    self.store.apply(put, deleted)  # before the reply: a crash cannot lose it
            except (PolicyError, ClaimError) as exc:
                self.policy.rollback(before)
                self.log.info(f"{what}_refused", error=str(exc), **fields)
                return None, str(exc)
            except Exception as exc:  # never a crashed server: an internal bug is still an `err` reply
                self.policy.rollback(before)
                self.log.error(f"{what}_failed", error=repr(exc), **fields)
                return None, f"internal driver error in {what}: {type(exc).__name__}: {exc}"
        self.log.info(what, ms=round((time.perf_counter() - start) * 1000, 3), **fields)
        return result, ""

    def CCIAdmit(self, request, context):  # noqa: N802
        fields = {"pod": request.pod, "container": request.container, "claim_uid": request.claim_uid}
        try:
            available = parse_cpulist(request.availableCpus)
        except CPUListError as exc:
            return pb.AdmitResponse(err=f"availableCpus: {exc}")
        call = AdmitCall(namespace=request.namespace, claim_uid=request.claim_uid, claim_name=request.claim_name,
                         available=available, pod=request.pod, container=request.container,
                         resource_handle=request.resource_handle)
        admission, err = self._mutate("admit", lambda: self.policy.admit(call), fields)
        if err:
            return pb.AdmitResponse(err=err)  # rSet left unset: an error reply carries no resource set (S1.6)
        return admit_response(admission)

    def CCIAddContainerResource(self, request, context):  # noqa: N802
        fields = {"pod": request.pod, "container": request.container, "container_id": request.container_id}
        _, err = self._mutate("add", lambda: self.policy.add(request.pod, request.container, request.container_id,
                                                            request.cgroup), fields)
        return pb.AddResourceResponse(err=err)

    def CCIRemoveContainerResource(self, request, context):  # noqa: N802
        fields = {"claim_uid": request.claim_uid, "container_id": request.container_id}
        _, err = self._mutate("remove", lambda: self.policy.remove(request.namespace, request.claim_uid,
                                                                  request.claim_name, request.container_id), fields)
        return pb.RemoveResourceResponse(err=err)


def admit_response(admission: Admission) -> pb.AdmitResponse:
    groups = [pb.ResourceSet(cpuset=format_cpulist(g.cpus), exclusive=g.exclusive) for g in admission.groups]
    return pb.AdmitResponse(rSet=pb.ResourceSet(cpuset=format_cpulist(admission.cpuset),
                                                exclusive=admission.exclusive), groups=groups)


def start_server(servicer_adders, socket_path: Path, workers: int = 4) -> grpc.Server:
    """Serve on ``unix:<socket_path>`` (a stale socket from a crash is removed first)."""
    if len(str(socket_path).encode()) > MAX_SOCKET_PATH:
        raise OSError(f"unix socket path {socket_path} is longer than {MAX_SOCKET_PATH} bytes; use shorter directories")
    socket_path.parent.mkdir(parents=True, exist_ok=True)
    socket_path.unlink(missing_ok=True)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
    for add in servicer_adders:
        add(server)
    if server.add_insecure_port(f"unix:{socket_path}") == 0:
        raise OSError(f"cannot listen on unix:{socket_path}")
    server.start()
    return server
