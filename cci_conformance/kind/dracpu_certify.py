"""The dra-cpu scenarios on one kind cluster, as findings; `cci-conformance kind certify-dra-cpu`, a run of them."""

from __future__ import annotations

import argparse
import time
import traceback
from datetime import datetime
from pathlib import Path

from ..certify import bundle
from ..errors import ConfigError
from ..paths import DRIVERS_DIR, SUITES_DIR
from ..topology import library
from . import dracpu
from .cluster import toolchain
from .cluster.config import ClusterPlan, NodePlan
from .cluster.lifecycle import KindCluster
from .dracpu_latency import preparation_latency
from .dracpu_manifests import DriverDeployment, feature_gates
from .dracpu_restarts import container_restart, driver_down, driver_restart, driver_restart_prepared
from .dracpu_scenarios import INCONCLUSIVE, Finding, empty_shared_pool, registration, shared_claim, steady
from .dracpu_session import DraCpuSession
from .image import nodeimage
from .runner import say

CATALOG = SUITES_DIR / "dra_cpu" / "requirements.yaml"
# In this order on one worker; each cleans up after itself. The empty shared pool comes last of those
# that make pods: it fills the node. LAT-501 then reads the kubelet's timing of every preparation of the run.
SCENARIOS = (steady, shared_claim, container_restart, driver_restart, driver_restart_prepared, driver_down,
             empty_shared_pool, preparation_latency)
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


DRIVER_DIR = DRIVERS_DIR / "dra-driver-cpu"


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "certify-dra-cpu", help="certify kubernetes-sigs/dra-driver-cpu on kind against the dra-cpu catalog "
        "(cci-conformance run --driver drivers_under_test/dra-driver-cpu, plus a findings table)")
    parser.add_argument("--topology", action="append", default=None,
                        help="library topology, one individual-mode cluster each (repeatable; default: "
                             "laptop-1s4c-smt2 server-2s8c-smt2-intel)")
    parser.add_argument("--grouped-topology", action="append", default=None,
                        help="also a grouped-mode cluster (repeatable; default: the first topology with more "
                             "than one NUMA node; none: no such cluster)")
    parser.add_argument("--static-topology", action="append", default=None,
                        help="also a static-policy worker for ROBUST-502 (repeatable; default: the first topology; "
                             "none: no such cluster)")
    parser.add_argument("--report-dir", default=None, help="bundle directory (default: ./cci-reports/<timestamp>)")
    parser.add_argument("--timeout", type=float, default=3600.0, metavar="S", help="deadline of the whole run")
    parser.set_defaults(handler=_cli)


def run_args(args) -> argparse.Namespace:
    """The `cci-conformance run` arguments of this command: the same suites (the dra-cpu catalog, on the CCI
    node image), reporter and bundle. Parsed by `run`'s own parser, so a new `run` option gets its default
    here too (a hand-built Namespace missed --stateful-examples and failed CI)."""
    from ..certify import cli as certify_cli

    parser = argparse.ArgumentParser(prog="cci-conformance")
    certify_cli.add_parser(parser.add_subparsers())
    argv = ["run", "--driver", str(DRIVER_DIR), "--suites", str(SUITES_DIR / "dra_cpu"), "--backend", "kind",
            "-n", "0", "--timeout", str(args.timeout)]
    if args.topology:
        argv += ["--topology", *args.topology]
    if args.report_dir:
        argv += ["--report-dir", str(args.report_dir)]
    argv += ["--", *(f"--dra-grouped-topology={t}" for t in args.grouped_topology or ()),
             *(f"--dra-static-topology={t}" for t in args.static_topology or ())]
    return parser.parse_args(argv)


def findings_table(report: dict) -> list[str]:
    """One line per requirement and cluster: the test's outcome and the start of its reason."""
    lines = []
    for req in report["requirements"]:
        for test in req["tests"]:
            cluster = test["nodeid"].partition("[")[2].rstrip("]") or "-"
            lines.append(f"{cluster:34s} {req['id']:12s} {test['outcome']:8s} {test['reason'][:100]}")
        if not req["tests"]:
            lines.append(f"{'-':34s} {req['id']:12s} {'missing':8s} {req['reason'][:100]}")
    return lines


def _cli(args) -> int:
    if not nodeimage.image_exists(nodeimage.default_image()):
        raise ConfigError("no node image", field="--image", fix="cci-conformance kind build-node-image")
    from ..certify import cli as certify_cli
    from ..certify.report import load_report

    namespace = run_args(args)
    if namespace.report_dir is None:
        namespace.report_dir = str(Path("cci-reports") / datetime.now().strftime("%Y%m%d-%H%M%S"))
    rc = certify_cli.run(namespace)
    report_path = Path(namespace.report_dir) / bundle.REPORT_JSON
    if report_path.is_file():
        print()
        for line in findings_table(load_report(report_path)):
            print(line)
    return rc
