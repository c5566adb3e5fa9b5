"""The API server of a run's cluster through the kubernetes client: one kept-alive connection, plain JSON dicts."""

from __future__ import annotations

import json
from pathlib import Path

REQUEST_TIMEOUT_S = 30  # every call has its deadline (connect and read)
RESOURCE_API = ("resource.k8s.io", "v1")  # DRA's objects (GA since Kubernetes 1.34)
# kubectl's resource names (singular or plural) -> the plural of resource.k8s.io, and whether it is namespaced
_RESOURCES = {"resourceclaims": True, "resourceclaimtemplates": True, "resourceslices": False,
              "deviceclasses": False}


class KubeAPIError(RuntimeError):
    """The API server answered with an error status (``status`` and its message)."""

    def __init__(self, status: int, message: str):
        super().__init__(f"API server: {status} {message}")
        self.status = status


class KubeAPI:
    """The client's typed calls with dict bodies and raw JSON answers (``_preload_content=False``), which read
    the same across client versions; every call under REQUEST_TIMEOUT_S."""

    def __init__(self, kubeconfig: Path):
        from kubernetes import client, config  # the [kind] extra: imported only when a kind session opens

        configuration = client.Configuration()
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
        self._client = client.ApiClient(configuration)
        self.core = client.CoreV1Api(self._client)
        self.apps = client.AppsV1Api(self._client)
        self.custom = client.CustomObjectsApi(self._client)

    def _call(self, fn, *args, timeout: float = REQUEST_TIMEOUT_S, **kwargs) -> str:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            response = fn(*args, _preload_content=False, _request_timeout=timeout, **kwargs)
        except ApiException as exc:
            raise KubeAPIError(exc.status, _message(exc.body)) from None
        except HTTPError as exc:  # no answer at all (refused, reset, timed out): status 0, the cause named
            raise KubeAPIError(0, f"no answer: {exc}") from None
        return response.data.decode()

    def create(self, obj: dict) -> dict:
        kind = (obj.get("apiVersion"), obj.get("kind"))
        namespace = obj["metadata"].get("namespace", "default")
        if kind == ("v1", "Pod"):
            return json.loads(self._call(self.core.create_namespaced_pod, namespace, obj))
        if kind == ("v1", "Namespace"):
            return json.loads(self._call(self.core.create_namespace, obj))
        plural = {"ResourceClaim": "resourceclaims", "ResourceClaimTemplate": "resourceclaimtemplates"}.get(kind[1])
        if kind[0] == "/".join(RESOURCE_API) and plural:
            return json.loads(self._call(self.custom.create_namespaced_custom_object, *RESOURCE_API, namespace,
                                         plural, obj))
        raise ValueError(f"kube_api does not write {kind[1]} of {kind[0]}")

    def get_pod(self, namespace: str, name: str) -> dict | None:
        try:
            return json.loads(self._call(self.core.read_namespaced_pod, name, namespace))
        except KubeAPIError as exc:
            if exc.status == 404:
                return None
            raise

    def read(self, resource: str, name: str = "", namespace: str = "default") -> dict:
        """``kubectl get RESOURCE [NAME] -n NAMESPACE -o json`` as the API answers it, for pods, nodes and
        resource.k8s.io's objects (singular or plural names, as kubectl takes them): the object, or a list with
        ``items``. A named object that does not exist raises KubeAPIError 404."""
        plural = resource if resource.endswith("s") else resource + "s"
        if plural == "pods":
            call = (self.core.read_namespaced_pod, name, namespace) if name else \
                (self.core.list_namespaced_pod, namespace)
        elif plural == "nodes":
            call = (self.core.read_node, name) if name else (self.core.list_node,)
        elif plural in _RESOURCES and _RESOURCES[plural]:
            call = (self.custom.get_namespaced_custom_object, *RESOURCE_API, namespace, plural, name) if name else \
                (self.custom.list_namespaced_custom_object, *RESOURCE_API, namespace, plural)
        elif plural in _RESOURCES:
            call = (self.custom.get_cluster_custom_object, *RESOURCE_API, plural, name) if name else \
                (self.custom.list_cluster_custom_object, *RESOURCE_API, plural)
        else:
            raise ValueError(f"kube_api does not read {resource}")
        return json.loads(self._call(*call))

    def delete(self, resource: str, name: str, namespace: str = "default", grace_seconds: int | None = None) -> None:
        """Ask for one object's deletion (a pod's grace period as its spec says unless ``grace_seconds``); one that
        is gone already is no error. Returns at once: the caller waits for it to go (``read`` answering 404)."""
        plural = resource if resource.endswith("s") else resource + "s"
        if plural == "pods":
            return self.delete_pod(namespace, name, grace_seconds)
        if not _RESOURCES.get(plural):
            raise ValueError(f"kube_api does not delete {resource}")
        try:
            self._call(self.custom.delete_namespaced_custom_object, *RESOURCE_API, namespace, plural, name)
        except KubeAPIError as exc:
            if exc.status != 404:
                raise

    def list_pods(self, label_selector: str = "", field_selector: str = "") -> list[dict]:
        return json.loads(self._call(self.core.list_pod_for_all_namespaces, label_selector=label_selector,
                                     field_selector=field_selector))["items"]

    def pod_events(self, namespace: str, name: str) -> list[dict]:
        """The events the cluster recorded about one pod (the kubelet's FailedCreatePodSandBox and the like)."""
        return json.loads(self._call(self.core.list_namespaced_event, namespace,
                                     field_selector=f"involvedObject.kind=Pod,involvedObject.name={name}"))["items"]

    def delete_pod(self, namespace: str, name: str, grace_seconds: int | None = None) -> None:
        try:
            self._call(self.core.delete_namespaced_pod, name, namespace, grace_period_seconds=grace_seconds)
        except KubeAPIError as exc:
            if exc.status != 404:
                raise

    def delete_claims(self, namespace: str, label_selector: str) -> None:
        self._call(self.custom.delete_collection_namespaced_custom_object, *RESOURCE_API, namespace,
                   "resourceclaims", label_selector=label_selector)

    def patch_daemonset(self, namespace: str, name: str, patch: dict) -> None:
        """A JSON merge patch (RFC 7386) of a DaemonSet, as ``kubectl patch --type=merge``."""
        self._call(self.apps.patch_namespaced_daemon_set, name, namespace, patch,
                   _content_type="application/merge-patch+json")

    def node_proxy(self, node: str, path: str, timeout: float = REQUEST_TIMEOUT_S) -> str:
        """GET the kubelet's ``path`` (``metrics``, ``healthz``) through the API server's node proxy."""
        return self._call(self.core.connect_get_node_proxy_with_path, node, path, timeout=timeout)

    def close(self) -> None:
        self._client.close()


def _message(body) -> str:
    try:
        return json.loads(body).get("message", "")
    except (TypeError, ValueError):
        return str(body)[:300]
