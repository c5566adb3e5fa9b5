"""The kind backend: the suites on a CCI-patched kubelet in a kind cluster, the driver as a DaemonSet."""

from __future__ import annotations

from .base import SessionConfig, register_backend


@register_backend
class KindBackend:
    """One kind cluster per run, one worker per machine (kind/run_cluster.py); a session is a worker, cleaned."""

    name = "kind"
    # `run -n N`: each pytest-xdist worker runs whole machines (certify/machine_scheduling.py) on its own clusters
    spreads_by_machine = True

    def prepare(self, groups) -> None:
        from ..kind.run_cluster import RunCluster

        RunCluster.plan(groups)

    def run_facts(self) -> dict:
        """Kubernetes version, node image and kubelet patch digest, workers, driver image (run_cluster.py)."""
        import sys

        module = sys.modules.get("cci_conformance.kind.run_cluster")  # no cluster was made if it was never imported
        return dict(module.RunCluster.facts) if module is not None else {}

    def open(self, config: SessionConfig):
        from ..kind.session import KindSession  # docker, kubectl and testinfra only when the backend is used

        return KindSession(config)
