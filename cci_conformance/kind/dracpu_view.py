"""What dra-driver-cpu itself reads from a faked machine, laid out as its DaemonSet mounts it, against the topology."""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

import yaml

from ..errors import ConfigError
from ..topology.model import Topology
from .dracpu_manifests import HOST_ROOT, DriverDeployment, daemonset
from .runner import run

# The driver's names for core types (pkg/cpuinfo CoreType.String in v0.2.0).
_CORE_TYPE = {"": "standard", "p": "p-core", "e": "e-core"}


def host_root(plan: DriverDeployment, machine: Path, scratch: Path) -> Path:
    """A directory that shows the driver exactly what its DaemonSet's sysfs mounts would show.

    ``machine`` is a rendered topology (``topology.render``): its ``sys/...`` stands for the kind
    node's ``/sys``, so every sysfs hostPath of the DaemonSet maps to ``machine/<hostPath>``.
    Paths the DaemonSet does not mount are absent, as in the pod.
    """
    container = daemonset(plan)["spec"]["template"]["spec"]
    volumes = {v["name"]: v["hostPath"]["path"] for v in container["volumes"]}
    root = scratch / "host"
    for mount in container["containers"][0]["volumeMounts"]:
        path = mount["mountPath"]
        if not path.startswith(HOST_ROOT + "/sys/"):
            continue
        source = machine / volumes[mount["name"]].lstrip("/")
        if not source.is_dir():
            # hostPath type Directory: the pod would not start either.
            raise ConfigError(f"the DaemonSet mounts {volumes[mount['name']]}, which this machine does not have",
                              file=str(machine), field=mount["name"],
                              fix="render a topology that has it, or deploy without hybrid=True")
        link = root / posixpath.relpath(path, HOST_ROOT)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(source.resolve(), target_is_directory=True)
    # The diagnostics mode reads the running driver's flags from /proc/<pid>/cmdline of a process
    # named dracpu under $HOST_ROOT/proc (internal/gatherinfo): give it the plan's command line.
    proc = root / "proc" / "1"
    proc.mkdir(parents=True)
    (proc / "comm").write_text("dracpu\n")
    (proc / "cmdline").write_bytes(b"\0".join(a.encode() for a in plan.args()) + b"\0")
    return root


def driver_report(binary: Path, root: Path, *, timeout: float = 120) -> dict:
    """The driver's own topology report (its ``dracpu-gatherinfo --stdout`` mode) with ``HOST_ROOT=root``."""
    alias = root.parent / "dracpu-gatherinfo"  # the program picks the mode from the name it runs as
    if not alias.exists():
        alias.symlink_to(Path(binary).resolve())
    env = {"HOST_ROOT": str(root), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    out = run([alias, "--stdout"], timeout=timeout, env=env, cwd=root.parent)
    return yaml.safe_load(out)


def mismatches(topology: Topology, report: dict) -> list[str]:
    """Every way the driver's view differs from the machine's sysfs truth; empty when they agree."""
    problems: list[str] = []
    seen = {c["cpuID"]: c for c in report["cpuDetails"]["cpus"]}
    online = {c.id for c in topology.cpus}
    if set(seen) != online:
        problems.append(f"CPUs: driver sees {sorted(set(seen))[:16]}..., sysfs has {len(online)} online "
                        f"(missing {sorted(online - set(seen))[:16]}, extra {sorted(set(seen) - online)[:16]})")
    l3 = {cpu: cache.id for cache in topology.caches if cache.level == 3 for cpu in cache.cpus}
    core_of = {cpu: core for core in topology.cores for cpu in core}
    for cpu in topology.cpus:
        got = seen.get(cpu.id)
        if got is None:
            continue
        want = {"socketID": cpu.package, "coreID": cpu.core, "numaNodeID": cpu.node,
                "coreType": _CORE_TYPE[cpu.core_type], "uncoreCacheID": l3.get(cpu.id, -1)}
        for key, value in want.items():
            if got.get(key) != value:
                problems.append(f"cpu{cpu.id}: {key} is {got.get(key)!r}, sysfs says {value!r}")
        siblings = set(core_of[cpu.id]) - {cpu.id}
        sibling = got.get("sibling", -1)
        if (sibling not in siblings) if siblings else (sibling != -1):
            problems.append(f"cpu{cpu.id}: sibling {sibling}, sysfs thread siblings {sorted(siblings)}")
    summary = report["cpuDetails"]["topology"]
    want_summary = {
        "numCPUs": len(online),
        "numSockets": len({c.package for c in topology.cpus}),
        "numNUMANodes": len({c.node for c in topology.cpus}),
        "numCores": len(topology.cores),
        "smtEnabled": topology.smt_control == "on",
    }
    for key, value in want_summary.items():
        if summary.get(key) != value:
            problems.append(f"topology: {key} is {summary.get(key)!r}, sysfs says {value!r}")
    return problems
