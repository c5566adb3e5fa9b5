"""kind: `--backend cluster` on a cluster made outside the harness (`kind create cluster`, two vanilla workers).

The harness gets only a kubeconfig and two node names; it reads each node's machine from the node, deploys the
driver from its image (preloaded on the workers here, as a vendor's registry would serve it), certifies both nodes
at once (one pytest-xdist worker each) and leaves nothing behind. Its verdicts must equal the kind backend's on the
same machine: a topology spec of the host's shape, the machine the cluster's nodes see. The two reports merge
into one that validates against the schema.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml
from external_cluster import external_cluster, load_driver
from readiness import skip_unless_kind_ready, skip_unless_opted_in

from cci_conformance.certify.report import validation_errors
from cci_conformance.cli import main
from cci_conformance.cluster.kube import RUN_LABEL, Kube
from cci_conformance.cpuset import format_cpulist
from cci_conformance.dra import driver_image
from cci_conformance.dra.deployment import DriverDeployment, objects
from cci_conformance.drivers.manifest import load_manifest
from cci_conformance.kind.image import nodeimage, versions
from cci_conformance.paths import DRA_REFERENCE_DIR, DRIVERS_DIR
from cci_conformance.topology.spec import load_spec

pytestmark = [pytest.mark.kind, pytest.mark.slow]

OPT_IN = "CCI_KIND_CLUSTER"  # "1": run it (about 40 minutes on 2 cores with the kind comparison)
# Also certify dra-driver-cpu on the same cluster ("1"); it adds about 15 minutes.
OPT_IN_UPSTREAM = "CCI_KIND_CLUSTER_UPSTREAM"
DRIVERS = {"dra-reference": DRA_REFERENCE_DIR, "dra-driver-cpu": DRIVERS_DIR / "dra-driver-cpu"}
VENDOR_DS = "vendor-cpu"  # the DaemonSet a vendor runs already, in kube-system (--driver-daemonset)


@pytest.fixture(scope="module")
def cluster():
    skip_unless_opted_in(OPT_IN, "--backend cluster on a kind cluster made outside the harness", "about 40 minutes")
    skip_unless_kind_ready("--backend cluster", nodeimage.default_image(versions.VANILLA))
    with external_cluster(f"cci-external-{os.getpid()}") as made:
        for folder in DRIVERS.values():
            load_driver(made, folder)
        yield made


def _leftovers(cluster) -> list[str]:
    kube = Kube(cluster.kubeconfig)
    out = kube.kubectl("get", "namespaces,daemonsets,pods,resourceclaims,deviceclasses,clusterroles", "-A",
                       "-l", RUN_LABEL, "-o", "name")
    return [line for line in out.splitlines() if line.strip()]


def _certify(args: list[str], out: Path) -> tuple[int, dict, float]:
    start = time.monotonic()
    code = main(["run", *args, "--report-dir", str(out)])
    return code, json.loads((out / "report.json").read_text()), time.monotonic() - start


def _statuses(report: dict) -> dict[str, str]:
    return {r["id"]: r["status"] for r in report["requirements"]}


def _host_spec(node: dict, path: Path) -> Path:
    """A topology spec of the node's shape (sockets, NUMA nodes, cores, threads) for the kind backend."""
    t = node["topology"]
    per_node = t["cores"] // (t["sockets"] * (t["numa_nodes"] // t["sockets"] or 1))
    nodes = [{"cores": per_node, "memory": "4G"}] * max(1, t["numa_nodes"] // t["sockets"])
    spec = {"description": f"the shape of cluster node {node['name']}", "threads_per_core": t["threads_per_core"],
            "packages": [{"nodes": nodes}] * t["sockets"]}
    path.write_text(yaml.safe_dump(spec))
    made = load_spec(path)
    assert (format_cpulist(made.online_cpus), len(made.cores), len(made.nodes)) == \
        (t["cpus"], t["cores"], t["numa_nodes"]), "the host's shape does not fit a simple spec"
    return path


def test_reference_on_two_nodes_at_once_equals_kind_and_merges(cluster, tmp_path):
    nodes = [arg for w in cluster.workers for arg in ("--node", w)]
    code, report, seconds = _certify(["--driver", str(DRA_REFERENCE_DIR), "--backend", "cluster", "--kubeconfig",
                                      str(cluster.kubeconfig), *nodes, "-n", "2"], tmp_path / "cluster")
    print(f"cluster backend, dra-reference, 2 nodes: exit {code} in {seconds:.0f} s, "
          f"{report['verdict']['counts']}")
    assert validation_errors(report) == []
    assert _leftovers(cluster) == []
    run = report["run"]
    assert run["backend"] == "cluster" and run["workers"] == 2 and run["complete"]
    recorded = {n["name"]: n for n in run["backend_facts"]["nodes"]}
    assert sorted(recorded) == sorted(cluster.workers)
    assert all(n["kubelet_version"] == versions.VANILLA.kubernetes for n in recorded.values())
    assert run["backend_facts"]["api_server"] == versions.VANILLA.kubernetes
    statuses = _statuses(report)
    reasons = {r["id"]: r["reason"] for r in report["requirements"]}
    assert all(reasons[r] for r, s in statuses.items() if s != "pass"), "every verdict but a pass says why"
    # the one feature the cluster backend never offers: the helper is reached through the kubelet
    assert statuses["RESTART-602"] == "untested" and "kubelet-stop" in reasons["RESTART-602"]

    node = recorded[cluster.workers[0]]
    spec = _host_spec(node, tmp_path / "host.yaml")
    kind_code, kind_report, kind_seconds = _certify(["--driver", str(DRA_REFERENCE_DIR), "--topology", str(spec)],
                                                    tmp_path / "kind")
    print(f"kind backend, dra-reference, the host's shape: exit {kind_code} in {kind_seconds:.0f} s, "
          f"{kind_report['verdict']['counts']}")
    # RESTART-602 needs the kubelet stopped, which only kind can do (docs/cluster.md)
    differ = {r: (statuses[r], s) for r, s in _statuses(kind_report).items() if statuses[r] != s
              and r != "RESTART-602"}
    assert differ == {}, {r: (differ[r], reasons[r][:200]) for r in differ}

    assert main(["report", "merge", str(tmp_path / "cluster"), str(tmp_path / "kind"),
                 "--out", str(tmp_path / "merged")]) in (0, 1)
    merged = json.loads((tmp_path / "merged" / "report.json").read_text())
    assert validation_errors(merged) == []
    assert [c["backend"] for c in merged["run"]["backend_facts"]["cells"]] == ["cluster", "kind"]


def test_upstream_driver_on_two_nodes_at_once(cluster, tmp_path):
    skip_unless_opted_in(OPT_IN_UPSTREAM, "dra-driver-cpu on --backend cluster", "about 15 more minutes")
    nodes = [arg for w in cluster.workers for arg in ("--node", w)]
    code, report, seconds = _certify(["--driver", str(DRIVERS["dra-driver-cpu"]), "--backend", "cluster",
                                      "--kubeconfig", str(cluster.kubeconfig), *nodes, "-n", "2"], tmp_path / "out")
    print(f"cluster backend, dra-driver-cpu, 2 nodes: exit {code} in {seconds:.0f} s, {report['verdict']['counts']}")
    assert validation_errors(report) == []
    assert _leftovers(cluster) == []
    assert sorted(n["name"] for n in report["run"]["backend_facts"]["nodes"]) == sorted(cluster.workers)


def _vendor_objects(cluster) -> list[dict]:
    """What a vendor's own install puts on the cluster: the reference's RBAC, DeviceClass and a DaemonSet of its
    own name on the first worker (policy none), none of it labelled by a run."""
    node = cluster.workers[0]
    built = driver_image.build(load_manifest(DRA_REFERENCE_DIR))  # cached: built and loaded by the fixture
    objs = objects(DriverDeployment(built.reference, node, program=built.program, driver_name=built.driver_name))
    for obj in objs:
        if obj["kind"] == "DaemonSet":
            obj["metadata"]["name"] = VENDOR_DS
    return objs


def test_a_driver_the_cluster_runs_already_is_observed_never_changed(cluster, tmp_path):
    kube = Kube(cluster.kubeconfig)
    vendor = _vendor_objects(cluster)
    kube.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": vendor}))
    try:
        code, report, seconds = _certify(
            ["--driver", str(DRA_REFERENCE_DIR), "--backend", "cluster", "--kubeconfig", str(cluster.kubeconfig),
             "--node", cluster.workers[0], "--driver-daemonset", f"kube-system/{VENDOR_DS}",
             "-k", "exactly_its_allocation or driver_restart_loses"], tmp_path / "observed")
        print(f"cluster backend, observed DaemonSet: exit {code} in {seconds:.0f} s, {report['verdict']['counts']}")
        assert validation_errors(report) == []
        statuses = _statuses(report)
        reasons = {r["id"]: r["reason"] for r in report["requirements"]}
        assert statuses["CLAIM-601"] == "pass"
        assert statuses["RESTART-603"] == "untested" and "only observes" in reasons["RESTART-603"]
        image = report["run"]["backend_facts"]["driver_image"]
        assert image["origin"] == "observed daemonset" and image["daemonset"] == f"kube-system/{VENDOR_DS}"
        assert image["image_ids"], "the digest the node runs is recorded"
        assert _leftovers(cluster) == []
        # the vendor's objects are all still there, unchanged in generation: observed, never patched or deleted
        ds = kube.get_json("daemonset", VENDOR_DS, "-n", "kube-system")
        assert ds["metadata"]["generation"] == 1 and RUN_LABEL not in ds["metadata"].get("labels", {})
        device_class = load_manifest(DRA_REFERENCE_DIR).dra_driver
        assert RUN_LABEL not in kube.get_json("deviceclass", device_class)["metadata"].get("labels", {})
        # and a run that would deploy the same objects refuses to take them over
        code, _, _ = _certify(["--driver", str(DRA_REFERENCE_DIR), "--backend", "cluster", "--kubeconfig",
                               str(cluster.kubeconfig), "--node", cluster.workers[0], "-k",
                               "exactly_its_allocation"], tmp_path / "refused")
        assert code != 0 and RUN_LABEL not in kube.get_json("deviceclass", device_class)["metadata"].get("labels", {})
    finally:
        kube.kubectl("delete", "-f", "-", "--ignore-not-found", "--wait=true", timeout=180,
                     stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": vendor}))
