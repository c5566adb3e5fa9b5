"""A thin CCI client with a deadline on every call, plus a locally started driver for tests and benchmarks."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import grpc

from ..cpuset import format_cpulist
from ..protocol.protos import cci_v1alpha1_pb2 as pb
from ..protocol.protos import cci_v1alpha1_pb2_grpc as pb_grpc
from ..topology.model import Topology
from .manifest import DriverManifest
from .process import DriverProcess

DEFAULT_DEADLINE_S = 5.0


class CCIClient:
    """Calls ``cci.v1alpha1.CCIDriver`` on a unix socket; every call carries a deadline."""

    def __init__(self, socket_path: Path | str, deadline_s: float = DEFAULT_DEADLINE_S):
        self.socket_path = Path(socket_path)
        self.deadline_s = deadline_s
        self._channel = grpc.insecure_channel(f"unix:{self.socket_path}")
        self.stub = pb_grpc.CCIDriverStub(self._channel)

    def admit(self, *, pod: str, container: str, claim_uid: str, claim: str | dict,
              available: frozenset[int] | str, namespace: str = "default", claim_name: str = "") -> pb.AdmitResponse:
        handle = claim if isinstance(claim, str) else json.dumps(claim)
        cpus = available if isinstance(available, str) else format_cpulist(available)
        return self.stub.CCIAdmit(pb.AdmitRequest(namespace=namespace, claim_uid=claim_uid,
                                                  claim_name=claim_name or claim_uid, availableCpus=cpus, pod=pod,
                                                  container=container, resource_handle=handle),
                                  timeout=self.deadline_s)

    def add(self, *, pod: str, container: str, container_id: str, cgroup: str = "") -> pb.AddResourceResponse:
        return self.stub.CCIAddContainerResource(pb.AddResourceRequest(cgroup=cgroup, pod=pod, container=container,
                                                                       container_id=container_id),
                                                 timeout=self.deadline_s)

    def remove(self, *, claim_uid: str, container_id: str, namespace: str = "default",
               claim_name: str = "") -> pb.RemoveResourceResponse:
        return self.stub.CCIRemoveContainerResource(pb.RemoveResourceRequest(
            namespace=namespace, claim_uid=claim_uid, claim_name=claim_name or claim_uid, container_id=container_id),
            timeout=self.deadline_s)

    def close(self) -> None:
        self._channel.close()


class LocalDriver:
    """A driver started from its manifest on a rendered machine in a short scratch directory.

    Layout as an embedded node session (docs/architecture.md): ``machine/sys``, ``kubelet/plugins_registry``,
    ``kubelet/plugins/<driver>``, ``driver-state``, ``logs/driver.log``. ``close()`` stops the driver and
    removes the directory."""

    def __init__(self, manifest: DriverManifest, topology: Topology, root: Path | None = None):
        from ..topology.render import render

        self.manifest, self.topology = manifest, topology
        self._own_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="cci-", dir="/tmp")) if root is None else Path(root)
        render(topology, self.root / "machine")
        kubelet = self.root / "kubelet"
        self.process = DriverProcess(manifest, kubelet / "plugins_registry", kubelet / "plugins" / manifest.name,
                                     self.root / "machine" / "sys", self.root / "driver-state",
                                     self.root / "logs" / "driver.log")
        self.client: CCIClient | None = None

    def start(self, timeout: float | None = None) -> LocalDriver:
        self.process.start()
        info = self.process.wait_registered(timeout)
        if self.client is not None:
            self.client.close()
        self.client = CCIClient(info.endpoint)
        return self

    def restart(self, hard: bool = True) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        self.process.kill() if hard else self.process.terminate()
        self.start()

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        self.process.terminate()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalDriver:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
