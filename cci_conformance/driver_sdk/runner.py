"""``run_driver``: the main of an SDK driver (arguments, topology, state, sockets, signals)."""

from __future__ import annotations

import argparse
import gc
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from ..protocol.protos import cci_v1alpha1_pb2_grpc as pb_grpc
from ..protocol.protos import pluginregistration_pb2_grpc as reg_grpc
from ..topology.model import Topology
from .log import StructuredLog
from .policy import Policy
from .server import CCIServicer, RegistrationServicer, start_server
from .state import StateError, StateStore

CCI_SOCKET = "cci.sock"
EXIT_BAD_START = 1


def build_arg_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="A CCI driver built on the cci-conformance driver SDK.")
    p.add_argument("--registry-dir", required=True, type=Path, help="the kubelet's plugins_registry directory")
    p.add_argument("--plugin-dir", required=True, type=Path, help="this driver's plugin directory (holds cci.sock)")
    p.add_argument("--sysfs-root", required=True, type=Path, help="the directory that stands for /sys")
    p.add_argument("--state-dir", required=True, type=Path, help="where driver_state.json is kept")
    p.add_argument("--driver-name", required=True, help="registration name; socket <registry-dir>/<name>-reg.sock")
    return p


def read_topology(sysfs_root: Path) -> Topology:
    from ..topology.sysfs_reader import read_sysfs  # the topology package's shared reader

    return read_sysfs(sysfs_root)


class DriverRuntime:
    """A running driver: both servers up, state loaded; ``stop()`` removes both sockets."""

    def __init__(self, policy: Policy, name: str, registry_dir: Path, plugin_dir: Path, state_dir: Path,
                 log: StructuredLog):
        self.policy, self.name, self.log = policy, name, log
        self.store = StateStore(state_dir)
        self.cci_socket = plugin_dir / CCI_SOCKET
        self.reg_socket = registry_dir / f"{name}-reg.sock"
        self.servicer = CCIServicer(policy, self.store, log)
        self._servers = []

    def load_state(self) -> None:
        data = self.store.load()  # StateError on a corrupt file: the caller refuses to start
        if data is not None:
            try:
                self.policy.restore_entries(data)
            except (KeyError, TypeError, ValueError) as exc:
                raise StateError(f"{self.store.path} does not fit this driver or machine: {exc}") from None
            self.log.info("state_loaded", path=str(self.store.path), admissions=len(self.policy.admissions))

    def start(self) -> None:
        # CCI first, registration last: once the plugin watcher sees us, CCI calls already work.
        self._servers.append(start_server([lambda s: pb_grpc.add_CCIDriverServicer_to_server(self.servicer, s)],
                                          self.cci_socket))
        reg = RegistrationServicer(self.name, self.cci_socket, self.log)
        self._servers.append(start_server([lambda s: reg_grpc.add_RegistrationServicer_to_server(reg, s)],
                                          self.reg_socket))
        self.log.info("serving", registration=str(self.reg_socket), cci=str(self.cci_socket),
                      capabilities=list(self.policy.capabilities))

    def stop(self) -> None:
        for server in reversed(self._servers):
            server.stop(grace=1).wait(2)
        self._servers.clear()
        for sock in (self.reg_socket, self.cci_socket):
            sock.unlink(missing_ok=True)
        self.store.close()
        self.log.info("stopped")


def run_driver(policy_factory: Callable[[Topology], Policy], argv: Sequence[str] | None = None) -> int:
    """Parse the standard arguments, serve until SIGTERM/SIGINT, return the exit code (0 on a clean stop)."""
    args = build_arg_parser().parse_args(argv)
    log = StructuredLog(args.driver_name)
    try:
        topology = read_topology(args.sysfs_root)
    except Exception as exc:
        log.error("topology_unreadable", sysfs_root=str(args.sysfs_root), error=str(exc),
                  fix="point --sysfs-root at a directory holding devices/system/cpu")
        return EXIT_BAD_START
    policy = policy_factory(topology)
    runtime = DriverRuntime(policy, args.driver_name, args.registry_dir, args.plugin_dir, args.state_dir, log)
    try:
        runtime.load_state()
    except StateError as exc:
        log.error("state_corrupt", error=str(exc), action="refusing to start")
        return EXIT_BAD_START
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop.set())
    log.info("starting", cpus=len(topology.cpus), nodes=len(topology.node_cpus), policy=type(policy).__name__)
    # Long-lived startup objects (topology, stubs) leave the collector's view: fewer, shorter GC pauses
    # in the admission path.
    gc.collect()
    gc.freeze()
    try:
        try:
            runtime.start()
        except OSError as exc:
            log.error("cannot_serve", error=str(exc))
            return EXIT_BAD_START
        while not stop.wait(3600):
            pass
    finally:
        runtime.stop()
    return 0


def main(policy_factory: Callable[[Topology], Policy]) -> None:
    """``sys.exit(run_driver(...))`` for a driver script's ``if __name__ == "__main__"``."""
    sys.exit(run_driver(policy_factory))
