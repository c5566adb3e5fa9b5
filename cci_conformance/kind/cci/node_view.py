"""One read of a kind worker's CCI ledger: both checkpoints, the cpuset recorder log and the kubelet's starts."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from pathlib import Path

from ...cpuset import CPUs, parse_cpulist
from ...node import checkpoint
from ...node.api import OwedRemove, SnapshotError
from ...node.checkpoint import CCI_STATE_FILE, CPU_STATE_FILE
from ...node.codec import owed_from_dict
from ...node.cpumanager import CPUManagerState, loads
from ..cluster.cpuset_log import RECORDER_LOG, complete, entries
from ..cluster.node_shell import ShellBroken, shell_for

KUBELET_ROOT = "/var/lib/kubelet"
FLAGS_FILE = f"{KUBELET_ROOT}/kubeadm-flags.env"
CPU_STATE_PATH = f"{KUBELET_ROOT}/{CPU_STATE_FILE}"  # the two checkpoints of the ledger, in the node
CCI_STATE_PATH = f"{KUBELET_ROOT}/{CCI_STATE_FILE}"
ONLINE = "/sys/devices/system/cpu/online"  # the faked machine's, mounted over the worker's (cluster/config.py)
# The kubelet logs this once per process start (server.go "Started kubelet"): the node's generation.
STARTED = '"Started kubelet"'
EXEC_TIMEOUT_S = 30
TIMEOUT_KILLED = 128 + 9  # the node's `timeout -s KILL` ended the script (node_shell)
_MARK = "@@cci-section@@"
# kubelet-cci registry.go logs these (klog, default verbosity) for every driver, whatever the driver logs itself.
REGISTERED = '"CCI driver registered"'
REFUSED = '"CCI driver registration refused"'
_KLOG_PAIR = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


class NodeReadError(RuntimeError):
    """A kind worker could not be read (docker exec failed or timed out)."""


def node_exec(node: str, script: str, timeout: float = EXEC_TIMEOUT_S) -> str:
    """Run ``sh -c script`` in the node container under a deadline; stdout, or NodeReadError with stderr. It runs in
    this process's long-lived shell in the node (cluster/node_shell.py: a pipe round trip, not a docker exec); a
    shell that broke is replaced, and the script is run once more with a docker exec of its own, whose failure
    says what is wrong with the node."""
    try:
        done = shell_for(node).run(script, timeout)
    except ShellBroken:
        return _exec_once(node, script, timeout)
    if done.status == TIMEOUT_KILLED:
        raise NodeReadError(f"{script[:80]!r} in {node} did not finish within {timeout} s")
    if done.status != 0:
        tail = done.stderr.decode(errors="replace")[-400:]
        raise NodeReadError(f"{script[:80]!r} in {node} exited {done.status}: {tail}")
    return done.stdout.decode(errors="replace")


def _exec_once(node: str, script: str, timeout: float) -> str:
    try:
        proc = subprocess.run(["docker", "exec", node, "sh", "-c", script], capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise NodeReadError(f"docker exec {node} did not finish within {timeout} s: {script[:80]}") from None
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace")[-400:]
        raise NodeReadError(f"docker exec {node} exited {proc.returncode}: {tail}")
    return proc.stdout.decode(errors="replace")


@dataclass(frozen=True)
class Ledger:
    """The worker's ledger: both checkpoints, decoded and checksum-verified, and the cpuset recorder log."""

    cpu_raw: bytes  # cpu_manager_state as on disk
    cci_raw: bytes  # cci_manager_state as on disk
    cpu: CPUManagerState
    cci: dict  # the cci_manager_state Data
    recorder: str  # the cpuset recorder log (JSON lines)
    online: CPUs  # /sys/devices/system/cpu/online as the kubelet sees it (the faked machine)

    def assigned(self) -> CPUs:
        """Every CPU some container holds. Coexistence: cpu_manager_state's assignments, static and CCI in one
        store (patch 0001). Alpha: the CCI records' exclusive and withheld CPUs, since the none policy keeps no
        assignment and the CCI manager's own store has cci_manager_state as its only record (alpha.go)."""
        if self.cci["mode"] != "alpha":
            return self.cpu.assigned()
        return frozenset().union(*(parse_cpulist(r["exclusive"]) | parse_cpulist(r["withheld"])
                                   for r in self.cci["containers"]))

    def shared_pool(self) -> CPUs:
        """The CPUs of every container without a grant: the static policy's default set in coexistence; in alpha
        online - held, reserved CPUs included (alpha.go Shared: the none policy takes no strict reservation)."""
        if self.cci["mode"] != "alpha":
            return self.cpu.default_cpuset
        return self.online - self.assigned()

    @property
    def pending(self) -> tuple[dict, ...]:
        return tuple(self.cci["pending"])

    def owed(self) -> tuple[OwedRemove, ...]:
        try:
            return tuple(owed_from_dict(e) for e in self.cci["pending"])
        except (KeyError, TypeError) as exc:
            raise SnapshotError(f"{CCI_STATE_FILE}: an owed Remove without {exc}") from None


@dataclass(frozen=True)
class NodeRead(Ledger):
    """What the worker holds at one read: the ledger and the kubelet's process facts."""

    reserved: CPUs  # --reserved-cpus of the kubelet's flags
    generation: int  # kubelet process starts in its journal
    kubelet_pid: int  # 0 while it is down
    kubelet_since: float  # epoch seconds of the kubelet unit's current start
    socket_present: bool  # the driver's registration socket is in the plugin watcher's directory
    startup: tuple[str, ...]  # the CCI manager's log messages since the kubelet's current start, registrations aside
    registry: str  # the kubelet's journal lines of CCI registrations since its current start (short-unix format)


def _flag(flags: str, name: str) -> str | None:
    for word in flags.replace('"', " ").split():
        if word.startswith(f"--{name}="):
            return word.split("=", 1)[1]
    return None


def _reserved(flags: str, cpu: CPUManagerState) -> CPUs:
    """--reserved-cpus: the static policy refuses to start without it; under the none policy (alpha) no flag is
    no reserved CPU."""
    value = _flag(flags, "reserved-cpus")
    if value is None and cpu.policy_name == "static":
        raise SnapshotError(f"the kubelet has no --reserved-cpus in {FLAGS_FILE}: the kind backend runs the static "
                            "policy with reserved CPUs (coexistence mode)")
    return parse_cpulist(value or "")


def read_node(node: str, root: Path, registration_socket: str) -> NodeRead:
    """Everything :meth:`KindSession.snapshot` needs: the ledger and the kubelet's flags as files through the node's
    root (``read_ledger``; through the node's shell where that root is not readable), then the kubelet's process
    and journal facts in one script of the node's shell (one systemctl, one journalctl over the CCI manager's and
    the start lines, about 50 ms; the former docker exec of a dozen commands took 200-370 ms and over 1000 of them
    were a third of a machine's run on kind, docs/measurements/kind.md)."""
    try:
        ledger = read_ledger(root)
        flags = _text_or_empty(root / FLAGS_FILE.lstrip("/"))
        socket_present = _is_socket(root / registration_socket.lstrip("/"))
    except PermissionError:  # a harness without root: the same files through the node's shell
        ledger, flags, socket_present = _ledger_by_shell(node, registration_socket)
    facts = node_exec(node, f"systemctl show -p MainPID -p ExecMainStartTimestamp --timestamp=unix kubelet; "
                            f"echo '{_MARK}'; journalctl -u kubelet -o short-unix --no-pager --grep "
                            f"'CCI|{STARTED}' || true")
    head, _, journal = facts.partition(_MARK + "\n")
    props = dict(line.split("=", 1) for line in head.splitlines() if "=" in line)
    since = float(props.get("ExecMainStartTimestamp", "").lstrip("@") or 0)
    lines = journal.splitlines()
    current = [line for line in lines if _stamp(line) >= since]
    return NodeRead(
        **{f.name: getattr(ledger, f.name) for f in dataclass_fields(Ledger)}, reserved=_reserved(flags, ledger.cpu),
        generation=sum(1 for line in lines if STARTED in line), kubelet_pid=int(props.get("MainPID", "0") or 0),
        kubelet_since=since, socket_present=socket_present,
        startup=tuple(msg for line in current if "CCI" in (msg := _message(line)) and "CCI driver " not in msg),
        registry="".join(f"{line}\n" for line in current if "CCI driver " in line))


def _text_or_empty(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def _is_socket(path: Path) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except FileNotFoundError:
        return False


def _stamp(line: str) -> float:
    """The epoch seconds a short-unix journal line starts with (-1 for a line without one)."""
    try:
        return float(line.partition(" ")[0])
    except ValueError:
        return -1.0


def _message(line: str) -> str:
    """A short-unix journal line's message (what ``-o cat`` prints): after ``<stamp> <host> <unit>[<pid>]: ``."""
    return line.partition("]: ")[2]


def _ledger_by_shell(node: str, registration_socket: str) -> tuple[Ledger, str, bool]:
    parts = [f"cat {CPU_STATE_PATH}", f"cat {CCI_STATE_PATH}",
             f"cat {RECORDER_LOG} 2>/dev/null || true", f"cat {ONLINE}", f"cat {FLAGS_FILE} 2>/dev/null || true",
             f"test -S {registration_socket} && echo yes || echo no"]
    out = node_exec(node, "; ".join(f"echo '{_MARK}'; {p}" for p in parts)).split(_MARK + "\n")[1:]
    if len(out) != len(parts):
        raise NodeReadError(f"reading {node}: {len(out)} sections instead of {len(parts)}")
    cpu_raw, cci_raw, recorder, online, flags, socket = out
    return _ledger(cpu_raw.encode(), cci_raw.encode(), recorder, online), flags, socket.strip() == "yes"


def _ledger(cpu_raw: bytes, cci_raw: bytes, recorder: str, online: str) -> Ledger:
    """The ledger decoded (both checkpoints checksum-verified), however its files were read."""
    return Ledger(cpu_raw=cpu_raw, cci_raw=cci_raw, cpu=loads(cpu_raw, path=CPU_STATE_PATH),
                  cci=checkpoint.decode(cci_raw, CCI_STATE_PATH), recorder=complete(recorder),
                  online=parse_cpulist(online.strip()))


def read_ledger(root: Path) -> Ledger:
    """The ledger read as plain files through the node container's root as the host sees it (``/proc/<pid>/root``):
    the session's waits poll it several times a second, and a ``docker exec`` costs about 0.2 CPU-seconds of a
    2-core host, which the kubelet under test needs. The kubelet replaces its checkpoints by rename (its
    checkpoint manager's file store), so a checkpoint is never read half written; the recorder log may end in a line
    still being appended, which the ledger leaves for the next read (cpuset_log.complete)."""
    paths = {"cpu": CPU_STATE_PATH, "cci": CCI_STATE_PATH, "online": ONLINE}
    raw = {}
    for part, path in paths.items():
        try:
            raw[part] = (root / path.lstrip("/")).read_bytes()
        except FileNotFoundError:
            raise NodeReadError(f"{path} is missing on the node (read through {root})") from None
    try:
        recorder = (root / RECORDER_LOG.lstrip("/")).read_text()
    except FileNotFoundError:
        recorder = ""  # nothing recorded yet: `cat ... || true` in read_node
    return _ledger(raw["cpu"], raw["cci"], recorder, raw["online"].decode())


@dataclass(frozen=True)
class RuntimeContainer:
    """One container as the runtime holds it, from the recorder log: what the kubelet created, last asked for and
    started, whatever the API server reports yet (it reports a start a PLEG relist and a status sync later)."""

    container_id: str
    cpus: CPUs | None  # the cpuset last asked for; None when the kubelet gave none
    started: bool  # runc started it (the recorder logs a start only once runc returned success)


def runtime_containers(text: str) -> dict[tuple[str, str], RuntimeContainer]:
    """(pod uid, container name) -> the latest container the kubelet created for it (sandboxes aside)."""
    latest: dict[tuple[str, str], str] = {}
    cpus: dict[str, CPUs] = {}
    started: set[str] = set()
    for record in entries(text):
        cid = record.get("id", "")
        if record.get("op") == "create" and record.get("container-type") == "container":
            latest[(record.get("sandbox-uid", ""), record.get("container-name", ""))] = cid
        elif record.get("op") == "start":
            started.add(cid)
        if record.get("op") in ("create", "update") and record.get("cpus"):
            cpus[cid] = parse_cpulist(record["cpus"])
    return {key: RuntimeContainer(cid, cpus.get(cid), cid in started) for key, cid in latest.items()}


def _registry_lines(registry: str, since: float):
    """(line, klog key/value pairs) of the journal lines of CCI registrations logged at or after ``since``."""
    for line in registry.splitlines():
        if _stamp(line) >= since:  # a line without a stamp is -1: never
            rest = line.partition(" ")[2]
            yield rest, {k: v.encode().decode("unicode_escape") for k, v in _KLOG_PAIR.findall(rest)}


def kubelet_registrations(registry: str, since: float, driver: str) -> list[str | None]:
    """The kubelet's answers to ``driver``'s registrations since ``since`` (epoch s), in order: None for a
    registration, the reason for a refusal; from NodeRead.registry (journal lines in short-unix format)."""
    events: list[str | None] = []
    for rest, fields in _registry_lines(registry, since):
        if REGISTERED in rest and fields.get("driver") == driver:
            events.append(None)
        elif REFUSED in rest:  # a refused driver may have registered under another name: every refusal counts
            events.append(fields.get("reason", "(no reason logged)"))
    return events


def kubelet_endpoint(registry: str, since: float, driver: str) -> str | None:
    """The endpoint of ``driver``'s last registration the kubelet accepted since ``since``: the PluginInfo
    endpoint the driver advertised, as kubelet-cci registry.go logs it when it opens its channel there;
    None when the kubelet accepted no registration of it."""
    endpoint = None
    for rest, fields in _registry_lines(registry, since):
        if REGISTERED in rest and fields.get("driver") == driver:
            endpoint = fields.get("endpoint")
    return endpoint

