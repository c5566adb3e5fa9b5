"""An in-process CCI driver for the node's own tests and benchmarks: scripted replies, every call recorded."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent import futures
from pathlib import Path

import grpc

from ..protocol.protos import cci_v1alpha1_pb2 as pb
from ..protocol.protos import cci_v1alpha1_pb2_grpc as cci_grpc
from ..protocol.protos import pluginregistration_pb2 as reg_pb2
from ..protocol.protos import pluginregistration_pb2_grpc as reg_grpc

AdmitFn = Callable[[pb.AdmitRequest], pb.AdmitResponse]


def noop_admit(req: pb.AdmitRequest) -> pb.AdmitResponse:
    """Grant nothing of its own: the container shares every available CPU (the cheapest valid reply)."""
    return pb.AdmitResponse(rSet=pb.ResourceSet(cpuset=req.availableCpus, exclusive=False))


class _CCI(cci_grpc.CCIDriverServicer):
    def __init__(self, driver: FakeDriver):
        self.d = driver

    def CCIAdmit(self, request, context):
        self.d.record("admit", request)
        return self.d.admit(request)

    def CCIAddContainerResource(self, request, context):
        self.d.record("add", request)
        return pb.AddResourceResponse(err=self.d.add_err)

    def CCIRemoveContainerResource(self, request, context):
        self.d.record("remove", request)
        return pb.RemoveResourceResponse(err=self.d.remove_err)


class _Registration(reg_grpc.RegistrationServicer):
    def __init__(self, driver: FakeDriver):
        self.d = driver

    def GetInfo(self, request, context):
        return reg_pb2.PluginInfo(**self.d.info)

    def NotifyRegistrationStatus(self, request, context):
        self.d.record("notify", request)
        return reg_pb2.RegistrationStatusResponse()


class FakeDriver:
    """Serves CCI on ``<root>/plugins/<name>/cci.sock`` and registration on ``<root>/plugins_registry``."""

    def __init__(self, kubelet_root: Path, name: str = "fake", admit: AdmitFn = noop_admit, record: bool = True):
        self.root = Path(kubelet_root)
        self.name = name
        self.admit = admit
        self.add_err = ""
        self.remove_err = ""
        self.keep_records = record
        self.calls: list[tuple[str, object]] = []
        self.cci_socket = self.root / "plugins" / name / "cci.sock"
        self.reg_socket = self.root / "plugins_registry" / f"{name}-reg.sock"
        self.info = {"type": "CCIPlugin", "name": name, "endpoint": str(self.cci_socket),
                     "supported_versions": ["v1alpha1"]}
        self._lock = threading.Lock()
        self._servers: list[grpc.Server] = []

    def record(self, kind: str, request) -> None:
        if self.keep_records:
            with self._lock:
                self.calls.append((kind, request))

    def of(self, kind: str) -> list:
        with self._lock:
            return [r for k, r in self.calls if k == kind]

    def start(self) -> FakeDriver:
        for path in (self.cci_socket, self.reg_socket):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.unlink(missing_ok=True)
        cci = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        cci_grpc.add_CCIDriverServicer_to_server(_CCI(self), cci)
        cci.add_insecure_port(f"unix:{self.cci_socket}")
        cci.start()
        reg = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
        reg_grpc.add_RegistrationServicer_to_server(_Registration(self), reg)
        reg.add_insecure_port(f"unix:{self.reg_socket}")  # last: the CCI socket answers before registration
        reg.start()
        self._servers = [cci, reg]
        return self

    def stop(self) -> None:
        for server in self._servers:
            server.stop(grace=None).wait(5)
        self._servers = []
        for path in (self.reg_socket, self.cci_socket):
            path.unlink(missing_ok=True)

    def __enter__(self) -> FakeDriver:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
