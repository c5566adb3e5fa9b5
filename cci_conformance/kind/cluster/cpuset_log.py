"""The node's cpuset recorder log: every cpuset the runtime was asked for, in order, and its replay against grants."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime

from ...cpuset import format_cpulist, parse_cpulist

# An empty `cpus` at create means the runtime was asked for no cpuset: the container may run on every
# CPU of the node (docs/dra-cpu.md "What each observation point gives"), so it overlaps every grant.
EVERY_CPU = None


@dataclass(frozen=True)
class Record:
    """One line of /var/log/cci-cpusets.jsonl: a create or update the runtime was asked for."""

    index: int
    op: str  # create | update
    container_id: str
    cpus: frozenset[int] | None  # None: no cpuset asked for at create (every CPU)
    time: datetime | None
    kind: str = ""  # container | sandbox (create only)
    namespace: str = ""
    pod: str = ""
    container: str = ""


@dataclass(frozen=True)
class Grant:
    """CPUs exclusively allocated to one container of one pod, live from its first create until ``end``."""

    name: str  # the claim
    namespace: str
    pod: str
    container: str
    cpus: frozenset[int]
    end: int | None = None  # record index at which the harness started releasing it (None: still live)

    def owner(self) -> tuple[str, str, str]:
        return (self.namespace, self.pod, self.container)


@dataclass(frozen=True)
class Violation:
    """At record ``index`` the ``container`` was asked to run on ``cpus``, which overlap ``grant`` in ``overlap``."""

    index: int
    container: tuple[str, str, str]
    container_id: str
    cpus: frozenset[int] | None
    grant: str
    overlap: frozenset[int]
    claimed: bool  # the container holds a grant of its own (claims overlap) or not (shared pool overlaps)

    def describe(self) -> str:
        ns, pod, ctr = self.container
        asked = "no cpuset (every CPU)" if self.cpus is None else format_cpulist(self.cpus)
        return (f"record {self.index}: {ns}/{pod}/{ctr} ({self.container_id[:12]}) asked for {asked}, "
                f"overlapping claim {self.grant} on {format_cpulist(self.overlap)}")


def _time(text: str) -> datetime | None:
    if not text:
        return None
    # Go's RFC3339Nano has up to 9 fractional digits; datetime takes 6.
    head, _, frac = text.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}+00:00" if frac else f"{head}+00:00")


def parse(text: str) -> list[Record]:
    """Records in log order; updates carry the identity of the create of the same container id."""
    records: list[Record] = []
    identity: dict[str, tuple[str, str, str, str]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        raw = json.loads(line)
        cid, cpus_text = raw["id"], raw.get("cpus", "")
        if raw["op"] == "create":
            identity[cid] = (raw.get("container-type", ""), raw.get("sandbox-namespace", ""),
                             raw.get("sandbox-name", ""), raw.get("container-name", ""))
            cpus = parse_cpulist(cpus_text) if cpus_text else EVERY_CPU
        else:
            cpus = parse_cpulist(cpus_text)
        kind, ns, pod, ctr = identity.get(cid, ("", "", "", ""))
        records.append(Record(len(records), raw["op"], cid, cpus, _time(raw.get("time", "")), kind, ns, pod, ctr))
    return records


@dataclass
class Replay:
    """The cpuset each application container was last asked for, record by record, and every overlap seen."""

    grants: list[Grant]
    # Container ids gone (exited or removed) at a point in time; stale sets of gone containers overlap nothing.
    gone: dict[str, datetime] = field(default_factory=dict)
    current: dict[str, Record] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)

    def run(self, records: list[Record], start: int = 0, live_before: set[str] | None = None) -> list[Violation]:
        """Replay ``records`` from ``start``; ``live_before`` names the containers running at ``start``."""
        for record in records[:start]:
            if record.kind == "container" and (live_before is None or record.container_id in live_before):
                if record.op == "create" or record.cpus:
                    self.current[record.container_id] = record
        started: set[str] = set()
        for record in records[start:]:
            self._drop_gone(record)
            if record.kind != "container":
                continue  # sandboxes (pause) are pinned by no one, kubelet or driver
            if record.op == "update" and not record.cpus:
                continue  # an empty update changes nothing
            self.current[record.container_id] = record
            for grant in self._active(record.index):
                if record.op == "create" and (record.namespace, record.pod, record.container) == grant.owner():
                    started.add(grant.name)  # a grant is live from its owner's first create on
            for grant in self._active(record.index):
                if grant.name in started:
                    for other in list(self.current.values()):
                        self._check(other, grant)
        return self.violations

    def _active(self, index: int) -> list[Grant]:
        return [g for g in self.grants if g.end is None or index < g.end]

    def _drop_gone(self, record: Record) -> None:
        if record.time is None:
            return
        for cid, when in self.gone.items():
            if cid in self.current and when <= record.time:
                del self.current[cid]

    def _check(self, other: Record, grant: Grant) -> None:
        owner = (other.namespace, other.pod, other.container)
        if owner == grant.owner():
            return
        overlap = grant.cpus if other.cpus is EVERY_CPU else grant.cpus & other.cpus
        if not overlap:
            return
        claimed = any(g.owner() == owner for g in self.grants)
        if any((v.index, v.grant) == (other.index, grant.name) for v in self.violations):
            return
        self.violations.append(Violation(other.index, owner, other.container_id, other.cpus, grant.name,
                                         frozenset(overlap), claimed))


def creates_of(records: list[Record], namespace: str, pod: str, container: str) -> list[Record]:
    """Every create of one container (restarts create it again), in order."""
    return [r for r in records if r.op == "create" and r.kind == "container"
            and (r.namespace, r.pod, r.container) == (namespace, pod, container)]


def last_cpus(records: list[Record], container_id: str) -> frozenset[int] | None:
    """What the container was last asked to run on (None: no cpuset, every CPU)."""
    last: frozenset[int] | None = EVERY_CPU
    for r in records:
        if r.container_id == container_id and (r.op == "create" or r.cpus):
            last = r.cpus
    return last


def gone_from_checkpoints(records: list[Record], checkpoints: list[tuple[datetime, set[str]]]) -> dict[str, datetime]:
    """Container id -> the first checkpoint at which it no longer ran, for containers created before it.

    A checkpoint is (when, ids running then). It bounds the exit from above: a container that exited
    between two checkpoints counts as running until the later one, which can only add overlaps.
    """
    created = {r.container_id: r.time for r in records if r.op == "create" and r.time is not None}
    gone: dict[str, datetime] = {}
    for when, running in sorted(checkpoints, key=lambda item: item[0]):
        for cid, born in created.items():
            if cid not in gone and cid not in running and born < when:
                gone[cid] = when
    return gone
