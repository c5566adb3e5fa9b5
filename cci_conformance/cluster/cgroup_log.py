"""Cpuset records for a node without the harness's runtime recorder: each container's cgroup cpuset, polled."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from ..cpuset import parse_cpulist
from ..kind.cluster.cpuset_log import EVERY_CPU, Record

# One line per running container: its id, then its cgroup's cpuset.cpus ("" when the runtime set none), found
# through the container's init process (/proc/<pid>/cgroup, cgroup v2), whatever the cgroup driver.
SNAPSHOT_SCRIPT = (
    "for id in $(crictl ps -q); do "
    "pid=$(crictl inspect -o go-template --template '{{.info.pid}}' \"$id\" 2>/dev/null) || continue; "
    "cg=$(sed -n 's/^0:://p' \"/proc/$pid/cgroup\" 2>/dev/null); "
    "printf '%s %s\\n' \"$id\" \"$(cat \"/sys/fs/cgroup$cg/cpuset.cpus\" 2>/dev/null)\"; done"
)
# The cpuset the kernel lets one container run on (its own, narrowed by its parents'), by container id.
EFFECTIVE_SCRIPT = (
    "pid=$(crictl inspect -o go-template --template '{{.info.pid}}' \"$1\") && "
    "cg=$(sed -n 's/^0:://p' \"/proc/$pid/cgroup\") && cat \"/sys/fs/cgroup$cg/cpuset.cpus.effective\""
)


def parse_snapshot(text: str) -> dict[str, frozenset[int] | None]:
    """Container id -> its cpuset (EVERY_CPU when the runtime set none)."""
    out: dict[str, frozenset[int] | None] = {}
    for line in text.splitlines():
        cid, _, cpus = line.strip().partition(" ")
        if cid:
            out[cid] = parse_cpulist(cpus.strip()) if cpus.strip() else EVERY_CPU
    return out


def identities(crictl_ps_json: str) -> dict[str, tuple[str, str, str]]:
    """Container id -> (namespace, pod, container) from ``crictl ps -o json``'s labels."""
    out = {}
    for c in json.loads(crictl_ps_json).get("containers", []):
        labels = c.get("labels", {})
        out[c["id"]] = (labels.get("io.kubernetes.pod.namespace", ""), labels.get("io.kubernetes.pod.name", ""),
                        labels.get("io.kubernetes.container.name", ""))
    return out


class PolledLog:
    """An append-only record list made by polling: a container seen first is a create, a changed cpuset an update.

    Coarser than the recorder: a change between two polls that is undone before the second is not seen, and
    a sandbox is never listed. The suites read records as a log (what happened since index N), which this keeps.
    """

    def __init__(self) -> None:
        self.records: list[Record] = []
        self._last: dict[str, frozenset[int] | None] = {}

    def observe(self, cpusets: dict[str, frozenset[int] | None], names: dict[str, tuple[str, str, str]],
                now: datetime | None = None) -> tuple[Record, ...]:
        now = now or datetime.now(UTC)
        for cid in sorted(cpusets):
            cpus = cpusets[cid]
            ns, pod, container = names.get(cid, ("", "", ""))
            if cid not in self._last:
                self.records.append(Record(len(self.records), "create", cid, cpus, now, "container", ns, pod,
                                           container))
            elif cpus != self._last[cid] and cpus is not EVERY_CPU:
                self.records.append(Record(len(self.records), "update", cid, cpus, now, "", ns, pod, container))
            self._last[cid] = cpus
        return tuple(self.records)
