"""The kind backend: the suites on a CCI-patched kubelet in a kind cluster, the driver as a DaemonSet."""

from __future__ import annotations

from ...backends.base import SessionConfig


class KindBackend:
    """One kind cluster per run, one worker per machine (kind/cci/run_cluster.py); a session is a worker, cleaned."""

    name = "kind"
    # `run -n N`: each pytest-xdist worker runs whole machines (certify/machine_scheduling.py) on its own clusters
    spreads_by_machine = True

    def prepare(self, groups) -> None:
        from .run_cluster import RunCluster

        RunCluster.plan(groups)

    def run_facts(self) -> dict:
        """Kubernetes version, node image and kubelet patch digest, workers, driver image (run_cluster.py)."""
        module = _run_cluster()
        return dict(module.RunCluster.facts) if module is not None else {}

    def finish(self) -> None:
        """Delete this process's clusters before it reports its end: a pytest-xdist worker that is still deleting
        after that is killed by xdist's teardown (10 s). Then delete the clusters of harness processes that no
        longer run, which is how the controller of `run -n` removes a cluster a killed worker could not."""
        module = _run_cluster()
        if module is not None:
            module.RunCluster.delete_all()
        if not module or not module.distributed():
            from .run_cluster import sweep_orphans

            sweep_orphans()

    def open(self, config: SessionConfig):
        from .session import KindSession  # docker, kubectl and testinfra only when the backend is used

        return KindSession(config)


def _run_cluster():
    """kind/cci/run_cluster.py if this process imported it, else None: then it made no cluster (and importing it
    here would load the kind code into runs that never used the backend)."""
    import sys

    return sys.modules.get("cci_conformance.kind.cci.run_cluster")
