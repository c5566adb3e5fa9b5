"""`cci-conformance kind certify-dra-cpu`: the dra-cpu scenarios on one kind cluster per topology, as findings."""

from __future__ import annotations

import json
import time
import traceback
from pathlib import Path

from ..certify.catalog import load_catalog
from ..errors import ConfigError
from ..paths import SUITES_DIR
from ..topology import library
from . import dracpu, dracpu_static, nodeimage, toolchain
from .cluster import KindCluster
from .cluster_config import ClusterPlan, NodePlan
from .dracpu_manifests import DriverDeployment, feature_gates
from .dracpu_restarts import container_restart, driver_down, driver_restart, driver_restart_prepared
from .dracpu_scenarios import INCONCLUSIVE, Finding, empty_shared_pool, registration, shared_claim, steady
from .dracpu_session import DraCpuSession
from .runner import say

CATALOG = SUITES_DIR / "dra_cpu" / "requirements.yaml"
# In this order on one worker; each cleans up after itself. The empty shared pool comes last: it fills the node.
SCENARIOS = (steady, shared_claim, container_restart, driver_restart, driver_restart_prepared, driver_down,
             empty_shared_pool)
NOT_RUN = "not run"
# Measured by no scenario yet, with the reason the findings say.
NOT_COVERED = {
    "ROBUST-502": "needs a worker with the static CPU manager policy: measured by the --static-topology run",
}
STATIC_ONLY = ("REG-501", "ROBUST-501", "ROBUST-502")
# With policy none the kubelet writes every CPU of its topology into the kubepods cgroup's cpuset
# (cm.getCgroupConfig: "we must make sure systemd is aware of the cpuset cgroup", GetAllCPUs), which a
# host with fewer CPUs than the faked machine refuses (ERANGE), and the kubelet exits. Policy none
# makes no CPU decision, so the kubelet is shown the real host and only the driver (its sysfs
# hostPaths) the faked machine, mounted here in the node.
MACHINE_ROOT = "/var/lib/cci-machine"


def cluster_plan(name: str, topology_name: str, image: str) -> ClusterPlan:
    """A control plane and one worker that sees the topology, kubelet CPU manager policy none.

    The driver's README: the kubelet's CPU manager and the driver are mutually incompatible, so
    the worker keeps the kubelet's default policy (`none`, no kubelet flag) and leaves every cpuset
    to the driver's NRI plugin. NRI is on in the node image's containerd (node_files.py).
    """
    return ClusterPlan(name, image, [NodePlan("control-plane"),
                                     NodePlan("worker", library.resolve(topology_name), None,
                                              machine_root=MACHINE_ROOT)])


def node_sysfs(node: NodePlan) -> str:
    """Where the worker shows the faked machine's sysfs to a hostPath."""
    return node.machine_root.rstrip("/") + "/sys"


def certify_topology(topology_name: str, version: str, name: str, *, logs_dir: Path | None = None,
                     plan_factory=cluster_plan, scenarios=SCENARIOS, device_mode: str = "individual") -> dict:
    """Build (cached), create the cluster, deploy the driver, run the scenarios, delete the cluster."""
    built = dracpu.build_image(version)
    plan = plan_factory(name, topology_name, nodeimage.default_image())
    topology = plan.nodes[1].topology
    worker = plan.node_names()[1]
    deployment = DriverDeployment(built.reference, worker, device_mode=device_mode,
                                  hybrid=bool(topology.core_types), node_sysfs=node_sysfs(plan.nodes[1]))
    plan.feature_gates = feature_gates(deployment)  # grouped mode: consumable capacity (KEP-5075)
    started = time.monotonic()
    findings: list[Finding] = []
    errors: list[str] = []
    with KindCluster(plan, kind=toolchain.kind_binary(), kubectl=toolchain.kubectl_binary(),
                     logs_dir=logs_dir) as cluster:
        cluster.create()
        cluster.wait_ready()
        session = DraCpuSession(cluster, worker, topology, deployment)
        try:
            session.deploy(built.archive, built.reference)
        except Exception:
            say(session.driver_diagnostics())
            cluster.export_logs()
            raise
        findings += registration(session)
        for scenario in scenarios:
            say(f"{topology_name}: scenario {scenario.__name__}")
            try:
                findings += scenario(session)
            except Exception as exc:  # one broken scenario must not hide the others' findings
                errors.append(f"{scenario.__name__}: {type(exc).__name__}: {exc}")
                say(traceback.format_exc())
        if logs_dir:
            session.save_artifacts(logs_dir)
            if errors:
                cluster.export_logs()
    policy = plan.nodes[1].profile.policy if plan.nodes[1].profile else "none"
    return {"topology": topology_name, "kubelet_cpu_manager_policy": policy, "device_mode": device_mode,
            "version": version,
            "recorder_replaced": session.recorder_replaced,
            "image": built.reference,
            "seconds": round(time.monotonic() - started, 1), "findings": [f.as_dict() for f in findings],
            "errors": errors}


def verdicts(run: dict, catalog_ids: list[str]) -> dict[str, dict]:
    """One verdict per catalog requirement: fail beats inconclusive beats pass; absent ones are 'not run'."""
    order = {"fail": 0, INCONCLUSIVE: 1, "pass": 2}
    out: dict[str, dict] = {}
    for finding in run["findings"]:
        have = out.get(finding["requirement"])
        if have is None or order[finding["verdict"]] < order[have["verdict"]]:
            out[finding["requirement"]] = finding
    for rid in catalog_ids:
        if rid not in out:
            reason = NOT_COVERED.get(rid, "its scenario raised an error: " + "; ".join(run["errors"]))
            out[rid] = {"requirement": rid, "verdict": NOT_RUN, "scenario": "", "evidence": [reason]}
    return {rid: out[rid] for rid in catalog_ids}


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("certify-dra-cpu", help="run the dra-cpu profile against kubernetes-sigs/"
                                   "dra-driver-cpu on kind, one cluster per topology; writes findings JSON")
    parser.add_argument("--topology", action="append", required=True, help="library topology (repeatable)")
    parser.add_argument("--static-topology", action="append", default=[],
                        help="also run ROBUST-502 on a worker with the static CPU manager policy (repeatable)")
    parser.add_argument("--device-mode", default="individual", choices=("individual", "grouped"),
                        help="the driver's --cpu-device-mode (grouped turns on DRAConsumableCapacity)")
    parser.add_argument("--version", default=dracpu.TARGETS[0].version, help="driver version (a build target)")
    parser.add_argument("--name-prefix", default="cci-dracpu-", help="cluster names: <prefix><n>")
    parser.add_argument("--out", default="dra-cpu-findings.json", help="findings file (JSON)")
    parser.add_argument("--logs-dir", default=None, help="export cluster logs here when a scenario fails to run")
    parser.set_defaults(handler=_cli)


def _cli(args) -> int:
    dracpu.target(args.version)
    if not nodeimage.image_exists(nodeimage.default_image()):
        raise ConfigError("no node image", field="--image", fix="cci-conformance kind build-node-image")
    ids = [r.id for r in load_catalog(CATALOG).requirements]
    runs = []
    jobs = [(t, cluster_plan, SCENARIOS, ids) for t in args.topology]
    jobs += [(t, dracpu_static.cluster_plan, (dracpu_static.coexistence,), list(STATIC_ONLY))
             for t in args.static_topology]
    for i, (topology_name, factory, scenarios, wanted) in enumerate(jobs):
        run = certify_topology(topology_name, args.version, f"{args.name_prefix}{i}", plan_factory=factory,
                               scenarios=scenarios, device_mode=args.device_mode,
                               logs_dir=Path(args.logs_dir) / f"{i}-{topology_name}" if args.logs_dir else None)
        run["verdicts"] = verdicts(run, wanted)
        runs.append(run)
        Path(args.out).write_text(json.dumps(runs, indent=1))
        for rid, v in run["verdicts"].items():
            print(f"{topology_name:28s} {rid:12s} {v['verdict']:13s} {v['evidence'][0][:110] if v['evidence'] else ''}")
    failed = any(v["verdict"] != "pass" for run in runs for v in run["verdicts"].values())
    return 1 if failed else 0
