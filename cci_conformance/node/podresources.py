"""The kubelet pod-resources API v1 (List, Get, GetAllocatableResources) served from the node's store."""

from __future__ import annotations

import grpc

from ..protocol.protos import podresources_v1_pb2 as pr
from ..protocol.protos import podresources_v1_pb2_grpc as pr_grpc
from .node import Node


class PodResourcesServicer(pr_grpc.PodResourcesListerServicer):
    """cpu_ids are exclusive CPUs only (static and CCI), exactly the store's holdings (docs/spec.md S3.7)."""

    def __init__(self, node: Node):
        self.node = node

    def _pod(self, records) -> pr.PodResources:
        first = records[0]
        return pr.PodResources(name=first.pod_name, namespace=first.namespace, containers=[
            pr.ContainerResources(name=r.container, cpu_ids=sorted(r.held)) for r in records])

    def List(self, request, context):
        pods = self.node.pods()
        return pr.ListPodResourcesResponse(pod_resources=[self._pod(recs) for _, recs in sorted(pods.items())])

    def Get(self, request, context):
        for recs in self.node.pods().values():
            if recs[0].pod_name == request.pod_name and recs[0].namespace == request.pod_namespace:
                return pr.GetPodResourcesResponse(pod_resources=self._pod(recs))
        context.abort(grpc.StatusCode.UNKNOWN,
                      f"pod {request.pod_name} in namespace {request.pod_namespace} not found")

    def GetAllocatableResources(self, request, context):
        # online − reserved: what the static policy may hand out (GetAllocatableCPUs)
        store = self.node.store
        return pr.AllocatableResourcesResponse(cpu_ids=sorted(store.online - store.reserved))
