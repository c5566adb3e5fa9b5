"""kind backend timings: node-image (re)build, plain `kind create cluster` vs our cluster with faked topologies.

Run: python benchmarks/bench_kind.py [--skip-build]
Needs docker (tools/docker-setup), Go and debootstrap for a cold build. Prints one JSON object with seconds.
A cold image build is timed by emptying the cache first (CCI_KIND_CACHE=/empty/dir); that takes tens of minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cci_conformance.kind.cluster import hostguard, lifecycle, toolchain  # noqa: E402
from cci_conformance.kind.cluster.config import ClusterPlan, NodePlan  # noqa: E402
from cci_conformance.kind.image import cache, nodeimage
from cci_conformance.kind.runner import run  # noqa: E402
from cci_conformance.node.profile import parse_config  # noqa: E402
from cci_conformance.topology import library  # noqa: E402

STATIC = {"mode": "coexistence", "cpuManagerPolicy": "static", "reservedSystemCPUs": "0", "cci": False}


def plain_create(image: str, workers: int = 0) -> float:
    """`kind create cluster` with the same image and no extras (workers: plain nodes only), then delete."""
    kind = toolchain.kind_binary()
    name = f"cci-bench-plain-{os.getpid()}"
    scratch = Path(tempfile.mkdtemp(prefix="cci-bench-", dir="/tmp"))
    env = {"KIND_EXPERIMENTAL_DOCKER_NETWORK": f"{name}-net"}
    argv = [kind, "create", "cluster", "--name", name, "--image", image, "--kubeconfig", scratch / "kc"]
    if workers:
        nodes = "".join("- role: worker\n" for _ in range(workers))
        (scratch / "c.yaml").write_text(f"kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nname: {name}\n"
                                        f"nodes:\n- role: control-plane\n{nodes}")
        argv += ["--config", scratch / "c.yaml"]
    start = time.monotonic()
    try:
        run(argv, timeout=600, env=env)
        return time.monotonic() - start
    finally:
        run([kind, "delete", "cluster", "--name", name, "--kubeconfig", scratch / "kc"], timeout=180, env=env)
        run(["docker", "network", "rm", f"{name}-net"], timeout=60)
        run(["rm", "-rf", scratch], timeout=60)


def faked_create(image: str) -> dict[str, float]:
    """Our lifecycle: control plane + two workers with faked topologies and the static policy, until Ready."""
    plan = ClusterPlan(f"cci-bench-{os.getpid()}", image, [
        NodePlan("control-plane"),
        NodePlan("worker", library.load("server-2s8c-smt2-intel"), parse_config(STATIC)),
        NodePlan("worker", library.load("server-2s-snc4"), parse_config(STATIC)),
    ])
    with lifecycle.KindCluster(plan, kind=toolchain.kind_binary(), kubectl=toolchain.kubectl_binary()) as kc:
        start = time.monotonic()
        kc.create()
        created = time.monotonic() - start
        kc.wait_ready()
        ready = time.monotonic() - start
        start = time.monotonic()
    deleted = time.monotonic() - start
    return {"create_s": round(created, 1), "create_and_ready_s": round(ready, 1), "delete_s": round(deleted, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-build", action="store_true", help="use the tagged image as it is")
    args = parser.parse_args()
    problem = toolchain.docker_problem()
    if problem:
        print(json.dumps({"skipped": problem}))
        return 0
    before = hostguard.read_sysctls()
    figures: dict[str, object] = {}
    if not args.skip_build:
        with cache.building("node image (benchmark)"):  # as the CLI does: one builder per cache at a time
            result = nodeimage.build_node_image()
        figures["build_s"] = round(result.seconds, 1)
        figures["build_reused"] = result.reused
    image = nodeimage.default_image()
    figures["plain_kind_create_1_node_s"] = round(plain_create(image), 1)
    figures["plain_kind_create_3_nodes_s"] = round(plain_create(image, workers=2), 1)
    figures["faked_3_nodes"] = faked_create(image)
    figures["host_sysctls_unchanged"] = hostguard.read_sysctls() == before
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
