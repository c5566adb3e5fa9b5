"""The one kind cluster of a run: created at the first session, one faked worker, the driver as a DaemonSet."""

from __future__ import annotations

import atexit
import os
import signal
import threading
import time
from dataclasses import dataclass

from ..drivers.manifest import DriverManifest, load_manifest
from ..errors import ConfigError
from ..node.profile import NodeConfig, parse_config
from ..paths import PROJECT_ROOT
from ..topology.model import Topology
from .cci_manifests import CCIDriverDeployment
from .cluster import KindCluster
from .cluster_config import ClusterPlan, NodePlan
from .runner import say

# The drivers whose kind image the harness builds today: the Go reference (cci_driver_image.py). The
# Python reference is served by it too: both implement docs/spec.md, and the node image has no Python.
REFERENCE_DRIVERS = ("reference", "go-reference")
GO_REFERENCE = PROJECT_ROOT / "drivers_under_test" / "go-reference"
# Cluster names: <prefix>-<pid>; CCI_KIND_PREFIX lets runs side by side on one host keep apart.
DEFAULT_PREFIX = "cci-run"
TEST_NAMESPACE_LABEL = "cci-conformance.io/backend"


@dataclass(frozen=True)
class RunKey:
    """What the cluster was made for: a later session asking for something else cannot share it."""

    topology: Topology
    reserved: frozenset[int]
    options: tuple[tuple[str, bool], ...]
    driver: str


def kind_driver(manifest: DriverManifest) -> DriverManifest:
    """The manifest whose argv the DaemonSet runs (its binary is the image's), or ConfigError naming the field."""
    if manifest.name in REFERENCE_DRIVERS:
        return load_manifest(GO_REFERENCE)
    if manifest.kind_image:
        raise ConfigError(f"driver {manifest.name}: the kind backend does not load a vendor image yet "
                          f"({manifest.kind_image!r})", file=str(manifest.path), field="kind.image",
                          fix="run this driver on the embedded backend; the kind backend's first cut deploys the "
                              "reference drivers only (docs/kind.md \"Backend kind (first cut)\")")
    raise ConfigError(f"driver {manifest.name} has no image for kind", file=str(manifest.path), field="kind.image",
                      fix="the kind backend's first cut deploys the reference drivers only; run this driver on "
                          "the embedded backend (docs/kind.md \"Backend kind (first cut)\")")


def node_config(profile: dict) -> NodeConfig:
    """The node profile, which must be what the patched kubelet implements: coexistence (static + CCI)."""
    config = parse_config(profile, "node profile")
    if config.mode != "coexistence" or config.policy != "static":
        raise ConfigError(f"node profile mode {config.mode!r} with policy {config.policy!r}: the CCI-patched "
                          "kubelet implements coexistence mode only (kubelet-cci/README.md \"Modes\")",
                          field="mode", fix="use --cci-node-profile coexistence on the kind backend")
    return config


class RunCluster:
    """Control plane + one worker with the session's faked machine; the driver deployed once; deleted at exit."""

    _current: RunCluster | None = None
    _lock = threading.Lock()

    def __init__(self, key: RunKey, config: NodeConfig, manifest: DriverManifest):
        from . import cci_driver_image, nodeimage, run_driver, toolchain

        image = nodeimage.default_image()
        if not nodeimage.image_exists(image):
            raise ConfigError(f"the kind node image {image} is not built", field="--backend",
                              fix="build it once with `cci-conformance kind build-node-image`")
        problem = toolchain.docker_problem()
        if problem:
            raise ConfigError(f"the kind backend needs docker: {problem}", field="--backend",
                              fix="run on the embedded backend, or set docker up (docs/kind.md)")
        self.key = key
        name = f"{os.environ.get('CCI_KIND_PREFIX', DEFAULT_PREFIX)}-{os.getpid()}"
        plan = ClusterPlan(name, image, [NodePlan("control-plane"), NodePlan("worker", key.topology, config)])
        self.cluster = KindCluster(plan, kind=toolchain.kind_binary(), kubectl=toolchain.kubectl_binary())
        self.worker = plan.node_names()[1]
        self.slots = len(key.topology.online_cpus) - len(config.reserved)  # docs/spec.md S3.9: one per CPU
        self.timings: dict[str, float] = {}
        atexit.register(self.delete)
        # SIGTERM (CI or `timeout` stopping the run) must delete the cluster like Ctrl-C does: as an interrupt,
        # so pytest ends and atexit runs (the default action would end the process without either).
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _interrupt)
        started = time.monotonic()
        try:
            self.cluster.create()
            self.cluster.wait_ready()
            self.timings["cluster"] = time.monotonic() - started
            built = cci_driver_image.build_image()
            self.deployment = CCIDriverDeployment(manifest, built.reference, self.worker, key.driver)
            # kind_config rendered the worker's machine under <workdir>/<node name> (cluster_config.kind_config)
            machine = self.cluster.workdir / self.worker
            self.timings["driver"] = run_driver.deploy(self.cluster, self.deployment, built.archive, self.slots,
                                                       machine)
        except BaseException:
            self.delete()
            raise
        say(f"kind backend: cluster {name} ready in {self.timings['cluster']:.1f} s, driver {key.driver} "
            f"registered {self.timings['driver']:.1f} s after apply")

    @classmethod
    def for_session(cls, topology: Topology, profile: dict, manifest: DriverManifest) -> RunCluster:
        config = node_config(profile)
        deployed = kind_driver(manifest)
        key = RunKey(topology, config.reserved, tuple(sorted(config.options.items())), manifest.name)
        with cls._lock:
            current = cls._current
            if current is not None and current.cluster.created:
                if current.key != key:
                    raise NotImplementedError(
                        "the kind backend's first cut runs one cluster per run for one topology, node profile and "
                        f"driver ({current.key.topology.name}, {current.key.driver}); this session asks for "
                        f"{topology.name}, {manifest.name} (docs/kind.md \"Backend kind (first cut)\")")
                return current
            cls._current = cls(key, config, deployed)
            return cls._current

    def delete(self) -> None:
        """Delete the cluster (nodes, network, scratch files); safe to call twice."""
        if self.cluster.created:
            say(f"kind backend: deleting cluster {self.cluster.plan.name}")
        self.cluster.delete()


def _interrupt(signum, frame):  # noqa: ARG001 - signal handler signature
    raise KeyboardInterrupt(f"signal {signum}")
