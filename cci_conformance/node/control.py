"""The node control gRPC service (nodecontrol.proto) and the snapshot it serves."""

from __future__ import annotations

import os

import grpc

from ..protocol.protos import nodecontrol_pb2 as nc
from ..protocol.protos import nodecontrol_pb2_grpc as nc_grpc
from .api import ContainerState, NodeSnapshot
from .codec import CodecError, pod_from_json, result_to_json, snapshot_to_json
from .node import Node


def snapshot(node: Node) -> NodeSnapshot:
    """The store and the runtime's files on disk, read under the admission lock (one consistent instant)."""
    with node.lock:
        store = node.store
        on_disk = node.runtime.scan()
        containers = tuple(
            ContainerState(namespace=r.namespace, pod_name=r.pod_name, pod_uid=r.pod_uid, container=r.container,
                           container_id=r.container_id, source=r.source, store_cpus=store.effective(r),
                           runtime_cpus=on_disk.get(k) or frozenset(), exclusive=bool(r.exclusive),
                           claim_uid=r.claim_uid, claim_name=r.claim_name, running=r.running)
            for k, r in sorted(store.records.items()))
        return NodeSnapshot(
            mode=node.config.mode, online=store.online, reserved=store.reserved, shared_pool=store.shared_pool,
            exclusive=store.exclusive_map(), containers=containers, drivers=node.watcher.names(),
            node_generation=node.generation, policy=node.config.policy,
            withheld={f"{k[0]}/{k[1]}": frozenset(r.withheld) for k, r in store.records.items() if r.withheld},
            pending=node.owed(), startup=tuple(node.events), refused=dict(node.watcher.refused),
            registrations=node.watcher.registrations)


class NodeControlServicer(nc_grpc.NodeControlServicer):
    def __init__(self, node: Node):
        self.node = node

    def Ping(self, request, context):
        return nc.PingResponse(generation=self.node.generation, mode=self.node.config.mode,
                               drivers=list(self.node.watcher.names()), pid=os.getpid(),
                               registrations=self.node.watcher.registrations)

    def CreatePod(self, request, context):
        try:
            pod = pod_from_json(request.json)
        except CodecError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return nc.JsonMessage(json=result_to_json(self.node.create_pod(pod)))

    def DeletePod(self, request, context):
        self.node.delete_pod(request.pod_uid)
        return nc.Empty()

    def StopContainer(self, request, context):
        self.node.stop_container(request.pod_uid, request.container)
        return nc.Empty()

    def Snapshot(self, request, context):
        return nc.JsonMessage(json=snapshot_to_json(snapshot(self.node)))
