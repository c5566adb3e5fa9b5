"""Python client of the node control API: the suites and backends drive a node through it."""

from __future__ import annotations

from pathlib import Path

import grpc

from ..protocol.protos import nodecontrol_pb2 as nc
from ..protocol.protos import nodecontrol_pb2_grpc as nc_grpc
from ..waiting import wait_for
from .api import AdmissionResult, NodeSnapshot, PodSpec
from .codec import pod_to_json, result_from_json, snapshot_from_json

# A restarted node re-creates its socket within a second; gRPC's default reconnect backoff (1 s, growing)
# would leave the channel failing long after the node is back.
FAST_RECONNECT = [("grpc.initial_reconnect_backoff_ms", 20), ("grpc.min_reconnect_backoff_ms", 20),
                  ("grpc.max_reconnect_backoff_ms", 20)]


class NodeClient:
    """One channel to ``<kubelet-root>/node-control.sock``; every call has the deadline ``timeout`` (seconds).

    create_pod's deadline is ``timeout`` plus the time the node may spend on driver RPCs (pass
    ``admission_timeout`` to widen it), since one admission can wait on several CCI calls.
    """

    def __init__(self, socket_path: Path | str, timeout: float = 10.0, admission_timeout: float | None = None):
        self.socket_path = Path(socket_path)
        self.timeout = timeout
        self.admission_timeout = admission_timeout or timeout * 3
        self._channel = grpc.insecure_channel(f"unix:{self.socket_path}", options=FAST_RECONNECT)
        self._stub = nc_grpc.NodeControlStub(self._channel)

    def ping(self, timeout: float | None = None) -> nc.PingResponse:
        return self._stub.Ping(nc.PingRequest(), timeout=timeout or self.timeout)

    def wait_ready(self, timeout: float = 10.0, generation_above: int = -1) -> nc.PingResponse:
        """Wait until the node answers (and, optionally, is a newer start than ``generation_above``)."""
        def ready():
            reply = self.ping(timeout=0.5)
            return reply if reply.generation > generation_above else None
        return wait_for(ready, timeout, interval=0.02, what=f"node control socket {self.socket_path}")

    def create_pod(self, pod: PodSpec) -> AdmissionResult:
        reply = self._stub.CreatePod(nc.JsonMessage(json=pod_to_json(pod)), timeout=self.admission_timeout)
        return result_from_json(reply.json)

    def delete_pod(self, pod_uid: str) -> None:
        self._stub.DeletePod(nc.PodRef(pod_uid=pod_uid), timeout=self.admission_timeout)

    def stop_container(self, pod_uid: str, container: str) -> None:
        self._stub.StopContainer(nc.ContainerRef(pod_uid=pod_uid, container=container),
                                 timeout=self.admission_timeout)

    def snapshot(self) -> NodeSnapshot:
        return snapshot_from_json(self._stub.Snapshot(nc.Empty(), timeout=self.timeout).json)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> NodeClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
