"""A kind cluster made the way a vendor makes one, outside the harness: the kind binary, a config file, done."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from cci_conformance.dra import driver_image
from cci_conformance.drivers.manifest import load_manifest
from cci_conformance.kind.cluster import toolchain
from cci_conformance.kind.cluster.config import ClusterPlan, NodePlan, kind_config
from cci_conformance.kind.cluster.lifecycle import remove_network
from cci_conformance.kind.image import nodeimage, versions
from cci_conformance.kind.runner import run
from cci_conformance.node.profile import parse_config

CREATE_TIMEOUT_S = 900  # three nodes on a loaded 2-core host
# A worker's kubelet as an operator would configure it: the CPU manager's static policy, CPU 0 reserved.
STATIC_RESERVED = {"mode": "coexistence", "cpuManagerPolicy": "static", "cci": False, "reservedSystemCPUs": "0"}


@dataclass(frozen=True)
class External:
    name: str
    kubeconfig: Path
    workers: tuple[str, ...]
    kind: Path
    env: dict

    def load(self, archive: Path) -> None:
        """What a vendor's registry does for its nodes: the driver image on each worker."""
        run([self.kind, "load", "image-archive", archive, "--name", self.name, "--nodes", ",".join(self.workers)],
            timeout=600, env=self.env)


def load_driver(cluster: External, driver_dir: Path) -> str:
    built = driver_image.build(load_manifest(driver_dir))
    cluster.load(built.archive)
    return built.reference


@contextlib.contextmanager
def external_cluster(name: str, static: tuple[bool, ...] = (False, True)) -> Iterator[External]:
    """A control plane and a vanilla worker per entry of ``static`` (the real machine; the kubelet's CPU manager
    policy none, or static with CPU 0 reserved); always deleted."""
    release = versions.VANILLA
    workers = [NodePlan("worker", None, parse_config(STATIC_RESERVED) if s else None) for s in static]
    plan = ClusterPlan(name, nodeimage.default_image(release), [NodePlan("control-plane"), *workers],
                       release=release)
    kind = toolchain.kind_binary(release)
    with tempfile.TemporaryDirectory(prefix="cci-external-") as scratch:
        config = Path(scratch) / "kind.yaml"
        config.write_text(yaml.safe_dump(kind_config(plan, Path(scratch)), sort_keys=False))
        kubeconfig = Path(scratch) / "kubeconfig"
        env = {"KIND_EXPERIMENTAL_DOCKER_NETWORK": f"{name}-net", "KUBECONFIG": str(kubeconfig)}
        try:
            run([kind, "create", "cluster", "--config", config, "--kubeconfig", kubeconfig, "--wait", "300s"],
                timeout=CREATE_TIMEOUT_S, env=env)
            yield External(name, kubeconfig, tuple(plan.node_names()[1:]), kind, env)
        finally:
            run([kind, "delete", "cluster", "--name", name, "--kubeconfig", kubeconfig], timeout=300,
                env={**env, "KUBECONFIG": os.devnull})
            remove_network(f"{name}-net")
