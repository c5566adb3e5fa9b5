"""The kind backend: the suites on a CCI-patched kubelet in a kind cluster, the driver as a DaemonSet."""

from __future__ import annotations

from .base import SessionConfig, register_backend


@register_backend
class KindBackend:
    """One kind cluster per run (cci_conformance/kind/run_cluster.py); each session is its worker, cleaned."""

    name = "kind"

    def open(self, config: SessionConfig):
        from ..kind.session import KindSession  # docker, kubectl and testinfra only when the backend is used

        return KindSession(config)
