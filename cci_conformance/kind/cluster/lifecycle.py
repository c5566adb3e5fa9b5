"""One kind cluster's lifecycle: create from a plan, wait until Ready, run kubectl, export logs, delete."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from ...waiting import wait_for
from ..runner import CommandFailed, run, say
from . import hostguard
from .config import ClusterPlan, write_kind_config
from .node_shell import close_shells

CREATE_TIMEOUT_S = 600
WORKDIR_PREFIX = "cci-kind-"
CLUSTER_MARKER = "cluster-name"  # in each scratch dir: which cluster its bind-mounted files belong to
SCRATCH_ROOT = Path("/tmp")  # where scratch dirs live; delete_orphans looks here (a test points it elsewhere)


def owned_name(prefix: str, tag: str = "") -> str:
    """A cluster name this process owns: ``<prefix>[-<tag>]-<pid>``. The pid comes last because that is how
    delete_orphans tells a dead run's cluster from a live one's (a number after the pid would be read as it)."""
    return f"{prefix}-{tag}-{os.getpid()}" if tag else f"{prefix}-{os.getpid()}"


class HostChanged(RuntimeError):
    """A node changed host-global kernel settings; they were restored, but this is a bug to fix."""


class KindCluster:
    """A kind cluster made from a ClusterPlan; ``with KindCluster(...) as c:`` deletes it on any exit.

    Each cluster gets its own docker network (kind's ``KIND_EXPERIMENTAL_DOCKER_NETWORK``) and its own
    kubeconfig file, so deleting it leaves no network behind and never touches ``~/.kube/config``.
    """

    def __init__(self, plan: ClusterPlan, *, kind: Path, kubectl: Path, logs_dir: Path | None = None):
        self.plan = plan
        self.kind = Path(kind)
        self.kubectl_bin = Path(kubectl)
        self.logs_dir = logs_dir
        self.workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX, dir=SCRATCH_ROOT))
        (self.workdir / CLUSTER_MARKER).write_text(plan.name)
        self.kubeconfig = self.workdir / "kubeconfig"
        self.network = f"{plan.name}-net"
        self.host_sysctls = hostguard.read_sysctls()
        self.created = False
        self.create_seconds: float | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        return {"KIND_EXPERIMENTAL_DOCKER_NETWORK": self.network, "KUBECONFIG": str(self.kubeconfig)}

    def create(self, timeout: float = CREATE_TIMEOUT_S) -> KindCluster:
        config = write_kind_config(self.plan, self.workdir)
        say(f"creating kind cluster {self.plan.name} ({len(self.plan.nodes)} nodes)")
        self.created = True  # from here on, delete() has something to clean up
        start = time.monotonic()
        try:
            run([self.kind, "create", "cluster", "--config", config, "--kubeconfig", self.kubeconfig,
                 "--retain"], timeout=timeout, env=self._env(), log=self.workdir / "kind.log")
        except CommandFailed:
            self.export_logs()
            raise
        finally:
            self._check_host()
        self.create_seconds = time.monotonic() - start
        return self

    def wait_ready(self, timeout: float = 180) -> None:
        """Wait until every node reports Ready (exports logs if they do not)."""
        def all_ready() -> bool:
            nodes = json.loads(self.kubectl("get", "nodes", "-o", "json"))["items"]
            if len(nodes) != len(self.plan.nodes):
                return False
            return all(any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])
                       for n in nodes)
        try:
            wait_for(all_ready, timeout=timeout, interval=1.0, what=f"all nodes of {self.plan.name} Ready")
        except TimeoutError:
            self.export_logs()
            raise

    def delete(self) -> None:
        """Delete nodes, network and scratch files; safe to call twice and after a failed create."""
        close_shells(self.plan.name + "-")  # this process's shells in its nodes (node_shell.py)
        try:
            if self.created:
                run([self.kind, "delete", "cluster", "--name", self.plan.name, "--kubeconfig", self.kubeconfig],
                    timeout=180, env=self._env())
                remove_network(self.network)
                self.created = False
        finally:
            self._check_host()
            remove_workdir(self.workdir)

    def _check_host(self) -> None:
        diff = hostguard.changed(self.host_sysctls)
        if diff:
            hostguard.restore(self.host_sysctls)
            raise HostChanged(f"a node changed host sysctls (restored): {diff}")

    def __enter__(self) -> KindCluster:
        # Ctrl-C raises KeyboardInterrupt; SIGTERM (CI stopping us) must clean up the same way.
        self._previous_term = signal.getsignal(signal.SIGTERM)
        if self._previous_term in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, _raise_interrupt)
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.delete()
        finally:
            if self._previous_term in (signal.SIG_DFL, None):
                signal.signal(signal.SIGTERM, signal.SIG_DFL)

    # -- access ----------------------------------------------------------------------------------
    def kubectl(self, *args: str, stdin: str | None = None, timeout: float = 60) -> str:
        return run([self.kubectl_bin, "--kubeconfig", self.kubeconfig, *args], timeout=timeout,
                   stdin=stdin.encode() if stdin is not None else None)

    def node_names(self) -> list[str]:
        return self.plan.node_names()

    def load_image(self, image: str, nodes: list[str] | None = None) -> None:
        """Copy a local docker image into the nodes' containerd (pods must use imagePullPolicy Never)."""
        argv = [self.kind, "load", "docker-image", image, "--name", self.plan.name]
        if nodes:
            argv += ["--nodes", ",".join(nodes)]
        run(argv, timeout=600, env=self._env())

    def load_archive(self, archive: Path, nodes: list[str] | None = None) -> None:
        """Import an OCI image archive (``oci_archive.write_archive``) into the nodes' containerd, no docker image."""
        argv = [self.kind, "load", "image-archive", archive, "--name", self.plan.name]
        if nodes:
            argv += ["--nodes", ",".join(nodes)]
        run(argv, timeout=600, env=self._env())

    def export_logs(self) -> Path | None:
        """``kind export logs`` into logs_dir (or the scratch dir); never raises."""
        target = self.logs_dir or (self.workdir / "logs")
        try:
            target.mkdir(parents=True, exist_ok=True)
            run([self.kind, "export", "logs", target, "--name", self.plan.name], timeout=300, env=self._env())
            say(f"cluster logs exported to {target}")
            return target
        except (CommandFailed, OSError) as exc:
            say(f"could not export logs: {exc}")
            return None


def _raise_interrupt(signum, frame):  # noqa: ARG001 - signal handler signature
    raise KeyboardInterrupt(f"signal {signum}")


def list_clusters(kind: Path) -> list[str]:
    out = run([kind, "get", "clusters"], timeout=60)
    return [line.strip() for line in out.splitlines() if line.strip() and "No kind clusters" not in line]


def remove_workdir(workdir: Path) -> None:
    """Remove a cluster's scratch dir with its marker last: a process killed in the middle (xdist kills a worker
    still busy 10 s after an interrupted run's teardown) leaves the marker, by which delete_orphans finishes."""
    marker = workdir / CLUSTER_MARKER
    if workdir.is_dir():
        for child in workdir.iterdir():
            if child != marker:
                shutil.rmtree(child, ignore_errors=True) if child.is_dir() and not child.is_symlink() else \
                    child.unlink(missing_ok=True)
    shutil.rmtree(workdir, ignore_errors=True)


def delete_clusters(kind: Path, prefix: str = "cci-") -> list[str]:
    """Delete every kind cluster whose name starts with ``prefix`` (what an interrupted run left)."""
    removed = []
    for name in list_clusters(kind):
        if name.startswith(prefix):
            run([kind, "delete", "cluster", "--name", name], timeout=180,
                env={"KUBECONFIG": os.devnull})
            subprocess.run(["docker", "network", "rm", f"{name}-net"], capture_output=True, check=False, timeout=60)
            removed.append(name)
    # Scratch dirs (rendered topologies, kubeconfigs) of clusters that no longer exist.
    alive = set(list_clusters(kind))
    for marker in SCRATCH_ROOT.glob(f"{WORKDIR_PREFIX}*/{CLUSTER_MARKER}"):
        if marker.read_text().startswith(prefix) and marker.read_text() not in alive:
            shutil.rmtree(marker.parent, ignore_errors=True)
    return removed


def remove_network(name: str, timeout: float = 60) -> None:
    """``docker network rm`` until the network is gone: right after ``kind delete cluster`` docker may still be
    detaching the nodes' endpoints, and one refused attempt used to leave the network behind."""
    def gone() -> bool:
        rm = subprocess.run(["docker", "network", "rm", name], capture_output=True, text=True, check=False,
                            timeout=60)
        return rm.returncode == 0 or "not found" in rm.stderr
    wait_for(gone, timeout, interval=1.0, what=f"docker to remove network {name}")


def delete_orphans(kind: Path) -> list[str]:
    """Delete the clusters of harness processes that died without deleting them (SIGKILL, a lost machine
    session): a cluster is the harness's when a scratch dir names it (CLUSTER_MARKER), and orphaned when its
    name ends in the pid of a process that no longer runs. Other clusters, and live runs', are left alone."""
    alive = set(list_clusters(kind))
    removed = []
    for marker in SCRATCH_ROOT.glob(f"{WORKDIR_PREFIX}*/{CLUSTER_MARKER}"):
        name = marker.read_text().strip()
        pid = name.rsplit("-", 1)[-1]
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        if name in alive:
            try:
                run([kind, "delete", "cluster", "--name", name], timeout=180, env={"KUBECONFIG": os.devnull})
            except CommandFailed as exc:
                # Someone else's leftover is no reason to fail this run: docker refuses a removal already in progress
                # (a run stopping still deletes its cluster after its parent died). The marker stays for the next sweep.
                say(f"kind backend: could not delete {name}, left by a run that no longer exists ({exc}); "
                    "a later run tries again")
                continue
            removed.append(name)
        remove_network(f"{name}-net")  # also when the cluster went and only its network stayed
        shutil.rmtree(marker.parent, ignore_errors=True)
    return removed

