"""The node process: ``python -m cci_conformance.node --config FILE`` (the embedded kubelet side of CCI)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from concurrent import futures
from pathlib import Path

import grpc

from ..errors import ConfigError
from ..protocol.protos import nodecontrol_pb2_grpc as nc_grpc
from ..protocol.protos import podresources_v1_pb2_grpc as pr_grpc
from .checkpoint import CheckpointError
from .control import NodeControlServicer
from .machine import read_machine
from .node import Node
from .podresources import PodResourcesServicer
from .profile import load_config

CONTROL_SOCKET = "node-control.sock"
POD_RESOURCES_SOCKET = Path("pod-resources") / "kubelet.sock"
EXIT_CHECKPOINT = 1
EXIT_INVARIANT = 70
log = logging.getLogger("cci.node")


def _serve(path: Path, add, servicer) -> grpc.Server:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)  # a socket left by a killed node (the kubelet re-creates it too)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix=path.stem))
    add(servicer, server)
    server.add_insecure_port(f"unix:{path}")
    server.start()
    return server


def _fatal(exc: BaseException) -> None:
    sys.stderr.write(f"FATAL: node store invariant violated: {exc}\n")
    sys.stderr.flush()
    os._exit(EXIT_INVARIANT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cci_conformance.node", description=__doc__)
    parser.add_argument("--config", required=True, help="node config: a node profile plus the paths")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(args.config)
        topology = read_machine(config.sysfs_root)
        if not config.reserved <= topology.online_cpus:
            raise ConfigError(f"reserved CPUs {sorted(config.reserved - topology.online_cpus)} are not online",
                              file=args.config, field="reservedSystemCPUs", fix="reserve online CPUs only")
        node = Node(config, topology)
        node.on_fatal = _fatal
        node.start()
    except ConfigError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return ConfigError.exit_code
    except CheckpointError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_CHECKPOINT
    root = config.kubelet_root
    servers = [
        _serve(root / POD_RESOURCES_SOCKET, pr_grpc.add_PodResourcesListerServicer_to_server,
               PodResourcesServicer(node)),
        _serve(root / CONTROL_SOCKET, nc_grpc.add_NodeControlServicer_to_server, NodeControlServicer(node)),
    ]
    log.info("node ready: generation %d, mode %s, %d containers", node.generation, config.mode,
             len(node.store.records))
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    for server in servers:
        server.stop(grace=1).wait(2)
    node.stop()
    for path in (root / CONTROL_SOCKET, root / POD_RESOURCES_SOCKET):
        path.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
