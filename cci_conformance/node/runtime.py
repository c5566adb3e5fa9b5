"""The fake container runtime: a cgroup-like tree, one ``cpuset.cpus`` per container, kept across node restarts."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..cpuset import CPUListError, CPUs, parse_cpulist
from .checkpoint import write_atomic
from .store import Key, cpulist

CPUSET_FILE = "cpuset.cpus"


def container_dir(root: Path, pod_uid: str, container: str) -> Path:
    """``<root>/kubepods/pod<uid>/<container>``: the layout the backend and suites read (docs/node.md)."""
    return Path(root) / "kubepods" / f"pod{pod_uid}" / container


class Runtime:
    """Stands for containerd + cgroupfs: it outlives the node process, so its files are the truth at restart."""

    def __init__(self, root: Path):
        self.root = Path(root)
        (self.root / "kubepods").mkdir(parents=True, exist_ok=True)
        self._base = str(self.root / "kubepods")
        self.applied: dict[Key, CPUs] = {}
        self.written: set[Key] = set()  # keys whose cpuset changed since the store last compared (take_written)

    def take_written(self) -> set[Key]:
        written, self.written = self.written, set()
        return written

    def cgroup_dir(self, key: Key) -> str:
        return f"{self._base}/pod{key[0]}/{key[1]}"

    def cgroup_path(self, key: Key) -> Path:
        return Path(self.cgroup_dir(key))

    def exists(self, key: Key) -> bool:
        return os.path.isdir(self.cgroup_dir(key))

    def create(self, key: Key, cpus: CPUs) -> None:
        pod_dir = f"{self._base}/pod{key[0]}"
        try:
            os.mkdir(pod_dir)
        except FileExistsError:
            pass
        cdir = f"{pod_dir}/{key[1]}"
        try:
            os.mkdir(cdir)
        except FileExistsError:  # left by an admission that never committed: replace its file atomically
            self._write(key, cpus)
        else:
            self._write(key, cpus, fresh=True)

    def apply(self, key: Key, cpus: CPUs) -> bool:
        """Set a container's cpuset (CRI UpdateContainerResources); returns whether the file changed."""
        if self.applied.get(key) == cpus:
            return False
        self._write(key, cpus)
        return True

    def _write(self, key: Key, cpus: CPUs, fresh: bool = False) -> None:
        path, data = f"{self.cgroup_dir(key)}/{CPUSET_FILE}", cpulist(cpus).encode() + b"\n"
        if fresh:
            # A new directory nobody reads yet: one plain write. A kill mid-write leaves a container the
            # store either does not know (deleted at restart) or re-applies at restart (Node._reconcile).
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        else:
            # Atomic (temp + rename) so a reader never sees a half-written cpulist; no fsync: cgroupfs is not durable.
            write_atomic(path, data, durable=False)
        self.applied[key] = cpus
        self.written.add(key)

    def remove(self, key: Key) -> None:
        path = self.cgroup_path(key)
        shutil.rmtree(path, ignore_errors=True)
        self.applied.pop(key, None)
        self.written.add(key)
        try:
            path.parent.rmdir()  # the pod cgroup goes with its last container
        except OSError:
            pass

    def scan(self) -> dict[Key, CPUs | None]:
        """Every container directory on disk -> its cpuset (None when the file is missing or unreadable)."""
        out: dict[Key, CPUs | None] = {}
        base = self.root / "kubepods"
        for pod_dir in sorted(base.iterdir()) if base.is_dir() else ():
            if not pod_dir.name.startswith("pod") or not pod_dir.is_dir():
                continue
            for cdir in sorted(pod_dir.iterdir()):
                if cdir.is_dir():
                    out[(pod_dir.name[3:], cdir.name)] = read_cpuset(cdir / CPUSET_FILE)
        return out

    def load(self) -> dict[Key, CPUs | None]:
        """Scan the tree and remember what is applied (at node start)."""
        found = self.scan()
        self.applied = {k: v for k, v in found.items() if v is not None}
        self.written = set(found)
        return found


def read_cpuset(path: Path) -> CPUs | None:
    try:
        return parse_cpulist(path.read_text())
    except (OSError, CPUListError):
        return None


def remove_tree(root: Path) -> None:
    if os.path.isdir(root):
        shutil.rmtree(root, ignore_errors=True)
