"""`cci-conformance run`: certify a driver by running the suites in a pytest subprocess, then summarise."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

from .. import bytecode, interrupts
from ..errors import ConfigError
from ..paths import SUITES_DIR
from ..procgroup import running, signal_group, stop_group, with_parent_death
from ..waiting import WaitTimeout, wait_for
from . import bundle
from .releases import certify_releases
from .report import load_report
from .settings import DEFAULT_BACKEND, DEFAULT_TOPOLOGIES, STATEFUL_EXAMPLES, RunSettings, check_stateful_examples
from .summary import PROGRESS_PREFIX, summary_lines

PYTEST_USAGE_ERROR = 4
INTERRUPT_GRACE_S = 240.0  # time pytest gets to close its sessions and write its partial report when interrupted
# (an embedded run needs seconds; a kind run deletes its pods and its cluster, minutes on a loaded host)

# A driver manifest with protocol dra/v1 (a DRA kubelet plugin) is certified by the DRA suites on kind, on the
# vanilla kubelet of --kubernetes (docs/dra-cpu.md): these replace the defaults of --suites, --backend and
# --topology for it.
DRA_SUITES = "dra"
DRA_BACKEND = "kind"
KIND_MAX_WORKERS = 4  # kind clusters of a run at once when -n is not given (default_workers)
EMBEDDED_EXTRA_WORKERS = 1  # workers beyond the usable CPUs on the embedded backend (default_workers)
# The whole run's deadline by backend. Every wait inside has its own; this one ends a run that would go on
# for a reason nobody foresaw. On kind every pod takes seconds to start and to release (docs/kind.md,
# "Measured"): the catalog on two machines takes about 70 minutes on 2 cores.
RUN_TIMEOUT_S = {"embedded": 1800.0, "kind": 7200.0}
DRA_TOPOLOGIES = ("laptop-1s4c-smt2", "server-2s8c-smt2-intel")
DRA_NODE_PROFILE = "node-none.yaml"  # in the DRA suites' folder: kubelet policy none, no CCI


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "run", help="certify a CCI driver and write the report bundle",
        description="Run the conformance suites against a driver and write report.json, junit.xml, "
                    "report.html and the bundle. Exit 0: every required requirement passed; 1: one failed "
                    "or is untested; 2: usage or configuration error.")
    p.add_argument("--driver", metavar="DIR|MANIFEST", help="driver folder (with driver.yaml) or manifest "
                   "(default: the reference driver)")
    p.add_argument("--topology", metavar="NAME", nargs="+", action="extend",
                   help=f"library topology names or spec files (default: {' '.join(DEFAULT_TOPOLOGIES)}; "
                        f"for a dra/v1 driver: {' '.join(DRA_TOPOLOGIES)})")
    p.add_argument("--profile", metavar="NAME|FILE", default="default", help="latency profile (default: default)")
    p.add_argument("--backend", default=None, help=f"where node and driver run (default: {DEFAULT_BACKEND}; "
                   f"{DRA_BACKEND} for a dra/v1 driver)")
    p.add_argument("--node-profile", metavar="NAME|FILE", help="node profile (default: coexistence)")
    p.add_argument("--kubernetes", metavar="VERSION", nargs="+", action="extend", default=None,
                   help="Kubernetes release(s) of the kind nodes of a dra/v1 driver (default: the DRA suites' "
                        "vanilla release); several: a run each, one merged report; a CCI driver runs on the CCI "
                        "node image's release")
    p.add_argument("--device-mode", choices=("individual", "grouped"), default=None,
                   help="how a dra/v1 driver publishes CPUs (its --cpu-device-mode): a device per CPU (default), "
                        "or a device per NUMA node whose capacity claims consume")
    p.add_argument("-n", "--workers", type=int, default=None, metavar="N",
                   help="pytest-xdist worker processes, each running whole machines (default: on the embedded "
                        "backend one per topology up to the usable CPUs, else 0: one process)")
    p.add_argument("--report-dir", metavar="DIR", help="bundle directory (default: ./cci-reports/<timestamp>)")
    p.add_argument("--suites", metavar="DIR", help="conformance suites folder (default: the harness's suites/; "
                   f"suites/{DRA_SUITES}/ for a dra/v1 driver)")
    p.add_argument("--catalog", metavar="FILE", help="requirement catalog (default: <suites>/requirements.yaml)")
    p.add_argument("-k", dest="keyword", metavar="EXPR", help="only tests matching EXPR (a partial run "
                   "leaves requirements untested, so it cannot certify)")
    p.add_argument("--stateful-examples", type=int, default=None, metavar="N",
                   help="ACCT-010's random examples per topology (default: "
                        + ", ".join(f"{n} on {b}" for b, n in STATEFUL_EXAMPLES.items())
                        + "); a larger N is a longer exploration, recorded in report.json")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="deadline of the whole run (default: "
                   + ", ".join(f"{s:g} s on {b}" for b, s in RUN_TIMEOUT_S.items()) + ")")
    p.add_argument("--kubeconfig", metavar="FILE", help="--backend cluster: kubeconfig of the existing cluster")
    p.add_argument("--node", metavar="NAME", action="append", dest="nodes",
                   help="--backend cluster: a node to certify on (repeat for several; one worker per node)")
    p.add_argument("--driver-daemonset", metavar="NAMESPACE/NAME", default=None,
                   help="--backend cluster: certify the driver the cluster already runs as this DaemonSet (observed "
                        "only: never deployed, restarted or stopped; docs/cluster.md)")
    p.add_argument("pytest_args", nargs="*", metavar="-- PYTEST_ARGS", help="extra pytest arguments after --")
    p.set_defaults(handler=run)


def default_workers(backend: str, topologies: int, cpus: int | None = None) -> int:
    """Worker processes when -n is not given: at most a machine per worker; one process on one usable CPU.
    Embedded: one more than the usable CPUs, since a worker spends much of its time waiting for the node and driver
    processes it starts (with them it kept 0.55-0.75 of a core busy; the default run took 72-78 s with 2 workers,
    63-69 s with 3 and 65 s with 4 on 2 cores), and a node and its driver take little memory. Kind: at most the
    usable CPUs and KIND_MAX_WORKERS, since a worker makes one machine's cluster at a time (1-2 GB; measured on 2
    cores: two machines' certification 27-31 min with two workers against 42+ min in one process, docs/kind.md).
    Latency measurements still run one at a time (certify/measuring.py). Another backend (an existing cluster's
    nodes) decides itself."""
    if backend not in (DEFAULT_BACKEND, DRA_BACKEND):
        return 0
    if cpus is None:  # the CPUs this process may run on (a container's limit), where the OS says so
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if cpus <= 1:
        return 0
    if backend == DRA_BACKEND:
        workers = min(cpus, topologies, KIND_MAX_WORKERS)
    else:
        workers = min(cpus + EMBEDDED_EXTRA_WORKERS, topologies)
    return workers if workers > 1 else 0


def _settings(args) -> tuple[RunSettings, Path]:
    if args.workers is not None and args.workers < 0:
        raise ConfigError("worker count must be 0 or more", field="-n", fix="use -n 2, or leave it out")
    hooks = _run_hooks(args.backend)
    if hooks is not None:
        hooks.check_run_options(args)
    elif getattr(args, "kubeconfig", None) or getattr(args, "nodes", None) or getattr(args, "driver_daemonset", None):
        raise ConfigError("--kubeconfig, --node and --driver-daemonset are about an existing cluster",
                          field="--backend", fix="add --backend cluster, or leave those options out")
    check_stateful_examples(args.stateful_examples, "--stateful-examples")
    settings = RunSettings(profile=args.profile, stateful_examples=args.stateful_examples)
    if args.driver:
        settings.driver = Path(args.driver).resolve()
    dra = settings.manifest.is_dra  # ConfigError names a bad manifest
    default_suites = SUITES_DIR / DRA_SUITES if dra else SUITES_DIR
    suites = Path(args.suites).resolve() if args.suites else default_suites
    if not suites.is_dir():
        raise ConfigError("suites folder not found", file=str(suites), field="--suites",
                          fix="pass the folder that holds the conformance test modules")
    settings.backend = args.backend or (DRA_BACKEND if dra else DEFAULT_BACKEND)
    if getattr(args, "nodes", None):  # --backend cluster: the machines are the nodes, read from them (cluster/run.py)
        settings.topologies = tuple(args.nodes)
    elif args.topology:
        settings.topologies = tuple(args.topology)
    elif dra:
        settings.topologies = DRA_TOPOLOGIES
    if args.node_profile:
        settings.node_profile = args.node_profile
    elif dra and (suites / DRA_NODE_PROFILE).is_file():
        settings.node_profile = str(suites / DRA_NODE_PROFILE)
    if args.kubernetes is not None:
        if not dra:
            raise ConfigError("--kubernetes chooses the vanilla kubelet of a dra/v1 driver's nodes; a CCI driver "
                              "runs on the CCI-patched node image", field="--kubernetes",
                              fix="leave --kubernetes out (or certify a driver.yaml with protocol: dra/v1)")
        from ..kind.image import versions

        given = [args.kubernetes] if isinstance(args.kubernetes, str) else args.kubernetes
        releases = tuple(dict.fromkeys(versions.release(v, field="--kubernetes").kubernetes for v in given))
        settings.kubernetes = releases[0]
        settings.kubernetes_releases = releases
    if args.device_mode is not None:
        if not dra:
            raise ConfigError("--device-mode chooses how a dra/v1 driver publishes CPUs; a CCI driver publishes none",
                              field="--device-mode", fix="leave --device-mode out (or certify a dra/v1 driver)")
        settings.device_mode = args.device_mode
    catalog = Path(args.catalog) if args.catalog else suites / "requirements.yaml"
    settings.catalog_path = catalog.resolve()
    return settings, suites


def _validate(settings: RunSettings) -> None:
    """Everything the CLI can check before starting pytest; the backend is checked inside pytest,
    where conftest plugins may have registered more backends."""
    settings.manifest  # noqa: B018 - loading is the check
    settings.catalog  # noqa: B018
    settings.budgets  # noqa: B018
    settings.node_profile_data  # noqa: B018
    from .settings import load_topology

    if _run_hooks(settings.backend) is not None:
        return  # the nodes' machines are read from them once the cluster is reached (cluster/run.py)
    for name in settings.topologies:
        load_topology(name)


def _run_hooks(backend: str | None):
    """The backend's class when it prepares a run before pytest (the cluster backend: run.py), else None. Through
    the registry: certify/ never imports a backend's package."""
    from ..backends.registry import backend_class

    try:
        cls = backend_class(backend) if backend else None
    except (ConfigError, ImportError):
        return None  # an unknown backend is reported inside pytest, where conftest plugins may register more
    return cls if hasattr(cls, "prepare_run") else None


def pytest_command(settings: RunSettings, suites: Path, report_dir: Path, args, workers: int = 0) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", str(suites), "-q", "-p", "no:cacheprovider", "--cci-progress",
           "--cci-driver", str(settings.driver), "--cci-profile", str(settings.profile),
           "--cci-backend", settings.backend, "--cci-node-profile", str(settings.node_profile),
           "--cci-catalog", str(settings.catalog_path), "--cci-report-dir", str(report_dir),
           "--junitxml", str(report_dir / bundle.JUNIT_XML), "-o", "junit_family=xunit1"]
    for name in settings.topologies:
        cmd += ["--cci-topology", name]
    if workers:
        cmd += ["-n", str(workers), "--dist", "loadscope"]
    if settings.stateful_examples is not None:
        cmd += ["--cci-stateful-examples", str(settings.stateful_examples)]
    if settings.kubernetes is not None:
        cmd += ["--dra-kubernetes", settings.kubernetes]
    if settings.device_mode is not None:
        cmd += ["--dra-device-mode", settings.device_mode]
    if args.keyword:
        cmd += ["-k", args.keyword]
    return cmd + list(args.pytest_args)


def _stream(proc: subprocess.Popen, log_path: Path) -> list[str]:
    """Copy the child's output to pytest.log, echoing the progress lines; returns the error lines."""
    errors: list[str] = []
    with log_path.open("w") as log:
        for line in proc.stdout:  # type: ignore[union-attr]
            log.write(line)
            at = line.find(PROGRESS_PREFIX)
            if at >= 0:
                sys.stdout.write(line[at:])
                sys.stdout.flush()
            elif line.startswith(("ERROR:", "INTERNALERROR>")):
                errors.append(line.rstrip())
    return errors


def _run_pytest(cmd: list[str], report_dir: Path, timeout: float) -> tuple[int, list[str], str]:
    # Its own session: a terminal Ctrl-C reaches only us, and we forward exactly one interrupt, so a second
    # one cannot cut short the partial report pytest writes in its sessionfinish. Should we be SIGKILLed,
    # the kernel SIGTERMs pytest, which then stops as on Ctrl-C (procgroup.with_parent_death, interrupts.py).
    argv, preexec = with_parent_death(cmd, signal.SIGTERM)
    with bytecode.run_cache() as env:  # its nodes and drivers start hundreds of times (bytecode.py)
        return _run_pytest_with(argv, preexec, env, report_dir, timeout)


def _run_pytest_with(argv, preexec, env: dict[str, str], report_dir: Path, timeout: float):
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                            start_new_session=True, preexec_fn=preexec, env=env)
    result: dict = {}
    reader = threading.Thread(target=lambda: result.update(errors=_stream(proc, report_dir / bundle.PYTEST_LOG)),
                              daemon=True)
    reader.start()
    interrupted = ""
    own_handler = interrupts.install()  # SIGTERM (CI's timeout, `kill`) stops the run as Ctrl-C does
    try:
        proc.wait(timeout=timeout)
    except (KeyboardInterrupt, subprocess.TimeoutExpired) as exc:
        interrupted = "timeout" if isinstance(exc, subprocess.TimeoutExpired) else "interrupt"
        _stop(proc, signal.SIGTERM if interrupts.requested() else signal.SIGINT)
    finally:
        if own_handler:
            interrupts.uninstall()
    reader.join(timeout=10)
    return proc.returncode, result.get("errors", []), interrupted


def _stop(proc: subprocess.Popen, sig: int) -> None:
    """Forward one interrupt to pytest's process group (its xdist workers too), give it INTERRUPT_GRACE_S to
    close its sessions and write the partial report, then SIGKILL what is left of the group."""
    interrupts.handling()  # a second SIGTERM is ignored while pytest cleans up; a second Ctrl-C kills at once
    signal_group(proc, sig)
    try:
        wait_for(lambda: not running(proc), INTERRUPT_GRACE_S, interval=0.05, what="pytest to end")
    except (WaitTimeout, KeyboardInterrupt):
        pass
    stop_group(proc)  # reaps the leader only after the group was signalled (procgroup.py)


def run_timeout(given: float | None, backend: str) -> float:
    """The run's deadline: the one given, else the backend's (an unknown backend gets the longest)."""
    if given is not None:
        if given <= 0:
            raise ConfigError(f"--timeout {given:g} is not a positive number of seconds", field="--timeout",
                              fix="give the run's deadline in seconds, e.g. --timeout 3600, or leave it out")
        return given
    return RUN_TIMEOUT_S.get(backend, max(RUN_TIMEOUT_S.values()))


def run(args) -> int:
    settings, suites = _settings(args)
    _validate(settings)
    timeout = run_timeout(args.timeout, settings.backend)
    report_dir = Path(args.report_dir or Path("cci-reports") / datetime.now().strftime("%Y%m%d-%H%M%S")).resolve()
    report_dir.mkdir(parents=True, exist_ok=True)
    workers = args.workers if args.workers is not None else default_workers(settings.backend,
                                                                            len(settings.topologies))
    cluster = None
    hooks = _run_hooks(settings.backend)
    if hooks is not None:  # --backend cluster: the nodes checked and read before pytest starts
        cluster = hooks.prepare_run(args, settings.manifest.is_dra, report_dir)
        workers = cluster.workers(args.workers)
        args.pytest_args = [*cluster.pytest_args(), *args.pytest_args]
    try:
        if len(settings.kubernetes_releases) > 1:
            return certify_releases(settings, settings.kubernetes_releases, report_dir,
                                    lambda one, where: _certify(one, suites, where, args, workers, timeout))
        return _certify(settings, suites, report_dir, args, workers, timeout)
    finally:
        if cluster is not None:
            for line in cluster.finish():  # the sessions delete what they made; this catches what they could not
                print(f"cci-conformance: cluster cleanup: {line}", file=sys.stderr)


def _certify(settings: RunSettings, suites: Path, report_dir: Path, args, workers: int, timeout: float) -> int:
    report_dir.mkdir(parents=True, exist_ok=True)
    print(f"cci-conformance: certifying {settings.manifest.name} on {', '.join(settings.topologies)} "
          f"(backend {settings.backend}{f', {workers} workers' if workers else ''}); report in {report_dir}",
          flush=True)
    started = time.monotonic()
    rc, error_lines, interrupted = _run_pytest(pytest_command(settings, suites, report_dir, args, workers),
                                               report_dir, timeout)
    report_path = report_dir / bundle.REPORT_JSON
    if rc == PYTEST_USAGE_ERROR:
        message = error_lines[0].removeprefix("ERROR:").strip() if error_lines else "pytest usage error"
        print(f"cci-conformance: error: {message} (full output: {report_dir / bundle.PYTEST_LOG})", file=sys.stderr)
        return 2
    if not report_path.is_file():
        print(f"cci-conformance: error: the run wrote no report (pytest exit {rc}); see "
              f"{report_dir / bundle.PYTEST_LOG}", file=sys.stderr)
        return 1
    report = load_report(report_path)
    config_errors = [e for e in report["errors"] if e["kind"] in ("config", "collection")]
    if config_errors:  # a broken suite or catalog: nothing was certified, say what to fix
        first = config_errors[0]
        more = f" (and {len(config_errors) - 1} more in {report_path})" if len(config_errors) > 1 else ""
        print(f"cci-conformance: error: {first['where']}: {first['message']}{more}", file=sys.stderr)
        return 2
    print()
    for line in summary_lines(report, report_dir):
        print(line)
    print(f"log:     {report_dir / bundle.PYTEST_LOG}  ({time.monotonic() - started:.1f} s)")
    if interrupted == "timeout":
        print(f"cci-conformance: the run exceeded --timeout {timeout:g} s; the report holds the partial "
              "results", file=sys.stderr)
        return 1
    if interrupted:
        print("cci-conformance: interrupted; the report holds the partial results", file=sys.stderr)
        return 130
    return int(report["verdict"]["exit_code"])

