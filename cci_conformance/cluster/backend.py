"""The `cluster` backend's entry in the registry: DRA suites through cluster/plugin.py, CCI suites refused."""

from __future__ import annotations

from typing import ClassVar

from ..backends.base import NodeStartFailed, SessionConfig

CCI_REFUSED = ("the CCI suites on --backend cluster need nodes running the harness's CCI kubelet (kubelet-cci/); "
               "certify a CCI driver with --backend kind, or a dra/v1 driver on this cluster")


class ClusterBackend:
    name: ClassVar[str] = "cluster"
    spreads_by_machine = True  # one node per pytest-xdist worker: two processes never act on one kubelet

    def prepare(self, groups) -> None:
        pass  # the nodes exist already

    def open(self, config: SessionConfig):
        raise NodeStartFailed(CCI_REFUSED, driver_at_fault=False)

    def run_facts(self) -> dict:
        return {}  # each node's facts come from its DRA session (dra/suite.py Sessions)

    def finish(self) -> None:
        pass  # each session deletes what it made; the controller's plugin sweeps the run's label

    # -- what `cci-conformance run` asks of a backend that prepares its run (certify/cli.py _run_hooks) ------
    @staticmethod
    def check_run_options(args) -> None:
        from .run import check_options

        check_options(args.kubeconfig, args.nodes, args.workers, args.topology, args.kubernetes,
                      getattr(args, "driver_daemonset", None))

    @staticmethod
    def prepare_run(args, dra: bool, report_dir):
        from .run import prepare

        return prepare(args.kubeconfig, args.nodes, dra, report_dir, getattr(args, "driver_daemonset", None),
                       getattr(args, "device_mode", None))
