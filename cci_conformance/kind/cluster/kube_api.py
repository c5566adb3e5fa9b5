"""The API server of a run's cluster through the kubernetes client: one kept-alive connection, plain JSON dicts."""

from __future__ import annotations

import json
from pathlib import Path

REQUEST_TIMEOUT_S = 30  # every call has its deadline (connect and read)


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

        try:
            response = fn(*args, _preload_content=False, _request_timeout=timeout, **kwargs)
        except ApiException as exc:
            raise KubeAPIError(exc.status, _message(exc.body)) from None
        return response.data.decode()

    def create(self, obj: dict) -> dict:
        kind = (obj.get("apiVersion"), obj.get("kind"))
        namespace = obj["metadata"].get("namespace", "default")
        if kind == ("v1", "Pod"):
            return json.loads(self._call(self.core.create_namespaced_pod, namespace, obj))
        if kind == ("v1", "Namespace"):
            return json.loads(self._call(self.core.create_namespace, obj))
        if kind == ("resource.k8s.io/v1", "ResourceClaim"):
            return json.loads(self._call(self.custom.create_namespaced_custom_object, "resource.k8s.io", "v1",
                                         namespace, "resourceclaims", obj))
        raise ValueError(f"kube_api does not write {kind[1]} of {kind[0]}")

    def get_pod(self, namespace: str, name: str) -> dict | None:
        try:
            return json.loads(self._call(self.core.read_namespaced_pod, name, namespace))
        except KubeAPIError as exc:
            if exc.status == 404:
                return None
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
        self._call(self.custom.delete_collection_namespaced_custom_object, "resource.k8s.io", "v1", namespace,
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
