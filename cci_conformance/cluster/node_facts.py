"""What a cluster node is, read from the node: its sysfs (the same reader as a faked machine's), its kubelet's
CPU manager profile, its versions."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ..cpuset import CPUListError, format_cpulist, parse_cpulist
from ..dra.api import POLICY_NONE, NodeProfile, static_reserved
from ..topology.model import Topology
from ..topology.sysfs_reader import read_sysfs

# The files read_sysfs reads, as shell globs below /sys, and the directory entries it lists (cpuN, its nodeN
# link): only these cross the wire, not the whole of sysfs (cpuidle and cpufreq are thousands of files).
SYSFS_FILES = (
    "devices/system/cpu/online", "devices/system/cpu/present", "devices/system/cpu/possible",
    "devices/system/cpu/smt/control", "devices/system/node/online", "devices/system/node/possible",
    "devices/cpu_core/cpus", "devices/cpu_atom/cpus",
    *(f"devices/system/cpu/cpu[0-9]*/topology/{f}" for f in ("physical_package_id", "die_id", "core_id",
                                                             "cluster_id")),
    *(f"devices/system/cpu/cpu[0-9]*/cache/index[0-9]*/{f}" for f in ("level", "type", "id", "shared_cpu_list",
                                                                      "size", "coherency_line_size")),
    *(f"devices/system/node/node[0-9]*/{f}" for f in ("cpulist", "meminfo", "distance")),
    "devices/system/node/node[0-9]*/hugepages/hugepages-*/nr_hugepages",
)
SYSFS_DIRS = ("devices/system/cpu/cpu[0-9]*", "devices/system/cpu/cpu[0-9]*/node[0-9]*")
FILE, DIR, CPUINFO = "@@cci-file ", "@@cci-dir ", "@@cci-cpuinfo"


def dump_script(sys_root: str = "/sys", proc_root: str = "/proc") -> str:
    """A POSIX sh script printing the files and directories read_sysfs reads below ``sys_root``, and cpuinfo."""
    return (
        f"cd {sys_root} || exit 1\n"
        f"for f in {' '.join(SYSFS_FILES)}; do [ -f \"$f\" ] && [ -r \"$f\" ] || continue; "
        f"printf '\\n{FILE}%s\\n' \"$f\"; cat \"$f\" 2>/dev/null; done\n"
        f"for d in {' '.join(SYSFS_DIRS)}; do [ -d \"$d\" ] && printf '\\n{DIR}%s\\n' \"$d\"; done\n"
        f"printf '\\n{CPUINFO}\\n'; head -c 8192 {proc_root}/cpuinfo\n"
    )


DUMP_SCRIPT = dump_script()


def parse_dump(text: str) -> tuple[dict[str, str], set[str], str]:
    """(file path -> content, directory paths, /proc/cpuinfo head) from DUMP_SCRIPT's output."""
    files: dict[str, str] = {}
    dirs: set[str] = set()
    current: list[str] | None = None
    cpuinfo: list[str] = []
    for line in text.splitlines():
        if line.startswith(FILE):
            current = []
            files[_safe(line[len(FILE):])] = current  # type: ignore[assignment]
        elif line.startswith(DIR):
            dirs.add(_safe(line[len(DIR):]))
            current = None
        elif line.startswith(CPUINFO):
            current = cpuinfo
        elif current is not None:
            current.append(line)
    contents = {path: "\n".join(lines).strip() + "\n" for path, lines in files.items()}  # type: ignore[arg-type]
    return contents, dirs, "\n".join(cpuinfo).strip() + "\n"


def _safe(path: str) -> str:
    """A relative path below /sys; anything else in a dump is refused (it came over the wire)."""
    path = path.strip()
    if not path or path.startswith("/") or ".." in path.split("/"):
        raise ValueError(f"sysfs dump names path {path!r} outside /sys")
    return path


def write_tree(text: str, root: Path) -> Path:
    """Write a dump as a rendered topology root (``root/sys/…``, ``root/proc/cpuinfo``); returns ``root/sys``."""
    files, dirs, cpuinfo = parse_dump(text)
    sys_root = root / "sys"
    for path in sorted(dirs):
        (sys_root / path).mkdir(parents=True, exist_ok=True)
    for path, content in files.items():
        (sys_root / path).parent.mkdir(parents=True, exist_ok=True)
        (sys_root / path).write_text(content)
    (root / "proc").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "cpuinfo").write_text(cpuinfo)
    return sys_root


def read_topology(root: Path, node: str) -> Topology:
    """The node's machine from its dump written by write_tree, named after the node."""
    return read_sysfs(root / "sys", name=node)


def topology_summary(t: Topology, dump: str = "") -> dict:
    """The node's machine as report.json records it: the shape the verdicts depend on."""
    out = {"cpus": format_cpulist(t.online_cpus), "cores": len(t.cores), "sockets": len(t.packages),
           "numa_nodes": len(t.nodes), "threads_per_core": t.threads_per_core, "smt_control": t.smt_control,
           "model_name": t.model_name}
    if dump:
        out["sysfs_sha256"] = hashlib.sha256(dump.encode()).hexdigest()
    return out


def node_profile(configz: dict) -> tuple[NodeProfile | None, str]:
    """The kubelet's CPU manager profile from its /configz, or None with the reason the harness cannot name it."""
    config = configz.get("kubeletconfig", configz)
    policy = config.get("cpuManagerPolicy") or "none"
    if policy == "none":
        return POLICY_NONE, ""
    if policy != "static":
        return None, f"the kubelet's CPU manager policy is {policy!r}, which the DRA suites do not know"
    text = config.get("reservedSystemCPUs") or ""
    try:
        reserved = parse_cpulist(text) if text else frozenset()
    except CPUListError:
        return None, f"the kubelet's reservedSystemCPUs {text!r} is not a CPU list"
    if not reserved:
        # kube-/system-reserved CPU quantities make the static policy pick CPUs the configuration does not name
        return None, ("the kubelet runs the static policy without reservedSystemCPUs: the reserved CPUs are "
                      "its choice, not named in its configuration")
    return static_reserved(reserved), ""


def node_summary(node: dict) -> dict:
    """Versions and platform from the Node object's status.nodeInfo."""
    info = node.get("status", {}).get("nodeInfo", {})
    return {"kubelet_version": info.get("kubeletVersion", ""), "kernel": info.get("kernelVersion", ""),
            "os_image": info.get("osImage", ""), "container_runtime": info.get("containerRuntimeVersion", ""),
            "architecture": info.get("architecture", "")}
