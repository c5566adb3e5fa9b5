"""The node's one CPU store: every container's holding, the pools derived from them, and their invariants."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

from ..cpuset import CPUs, format_cpulist, parse_cpulist

CCI, STATIC, SHARED = "cci", "static", "shared"
Key = tuple[str, str]  # (pod_uid, container name)
# The same few sets (the pool, availableCpus, grants) are formatted again and again on the admission path.
cpulist = functools.lru_cache(maxsize=4096)(format_cpulist)
_EMPTY: CPUs = frozenset()
FULL_CHECK_EVERY = 32  # Store.check recomputes everything from the records on this many calls' first


class StoreInvariantError(RuntimeError):
    """The store broke one of its invariants (docs/spec.md S3.2): a node bug, never a driver's fault."""


@dataclass(frozen=True)
class Record:
    """One container as the store knows it.

    ``exclusive`` are CPUs only this container may run on (static grant or CCI exclusive groups);
    ``withheld`` are idle siblings of a CORE-SIBLING-DENIED group, held so nobody else runs on those
    cores; ``shared_cpus`` is the union of a CCI container's SHARED groups (exclusive grants win over it).
    """

    pod_uid: str
    container: str
    namespace: str
    pod_name: str
    container_id: str
    source: str
    exclusive: CPUs = frozenset()
    withheld: CPUs = frozenset()
    shared_cpus: CPUs = frozenset()
    groups: tuple[tuple[CPUs, bool], ...] = ()
    claim_uid: str = ""
    claim_name: str = ""
    driver: str = ""
    running: bool = True

    def __post_init__(self) -> None:
        # derived once: the store reads these on every check
        object.__setattr__(self, "key", (self.pod_uid, self.container))
        object.__setattr__(self, "held", self.exclusive | self.withheld)

    # key: (pod_uid, container); held: CPUs accounted to this container, nobody else gets them
    # (its cpu_manager_state entry and pod-resources cpu_ids): exclusive | withheld
    key: Key = field(init=False, repr=False, compare=False)
    held: CPUs = field(init=False, repr=False, compare=False)

    def to_json(self) -> dict:
        return {
            "podUID": self.pod_uid, "container": self.container, "namespace": self.namespace,
            "podName": self.pod_name, "containerID": self.container_id, "source": self.source,
            "exclusive": cpulist(self.exclusive), "withheld": cpulist(self.withheld),
            "shared": cpulist(self.shared_cpus),
            "groups": [{"cpuset": cpulist(c), "exclusive": e} for c, e in self.groups],
            "claimUID": self.claim_uid, "claimName": self.claim_name, "driver": self.driver, "running": self.running,
        }

    @staticmethod
    def from_json(d: dict) -> Record:
        return Record(
            pod_uid=d["podUID"], container=d["container"], namespace=d["namespace"], pod_name=d["podName"],
            container_id=d["containerID"], source=d["source"], exclusive=parse_cpulist(d["exclusive"]),
            withheld=parse_cpulist(d["withheld"]), shared_cpus=parse_cpulist(d["shared"]),
            groups=tuple((parse_cpulist(g["cpuset"]), bool(g["exclusive"])) for g in d["groups"]),
            claim_uid=d["claimUID"], claim_name=d["claimName"], driver=d["driver"], running=bool(d["running"]),
        )


class Store:
    """Holdings keyed by (pod UID, container name); the shared pool is everything else (KEP-3675 l.433)."""

    def __init__(self, online: CPUs, reserved: CPUs, strict_reservation: bool):
        self.online = frozenset(online)
        self.reserved = frozenset(reserved)
        self.strict = strict_reservation
        self.records: dict[Key, Record] = {}
        self._held: CPUs = frozenset()
        self.version = 0  # increments whenever the held set changes (every derived cpuset may change)
        self.revision = 0  # increments on any change of the records
        self.dirty: set[Key] = set()  # keys changed since a writer last took them (take_dirty)
        self._pods: dict[str, list[Key]] = {}  # pod uid -> its keys, in admission order
        self._effective: dict[Key, tuple[int, Record, CPUs]] = {}
        self._pool: tuple[int, CPUs] = (-1, frozenset())
        # for check(): keys changed since the runtime cpusets were last compared, and the held-set
        # version of that comparison
        self._changed: set[Key] = set()
        self._compared_version = -1
        self._ids: dict[str, Key] = {}  # container id -> key
        self._held_size = 0  # sum of the records' held-set sizes: equals len(held) while they are disjoint
        self._checks = 0

    # ---- pools ----
    @property
    def held(self) -> CPUs:
        return self._held

    def _set_held(self, held: CPUs) -> None:
        if held != self._held:
            self._held = held
            self.version += 1
        self.revision += 1

    @property
    def shared_pool(self) -> CPUs:
        """online − every held CPU − reserved (when strict-cpu-reservation): the kubelet's defaultCpuSet."""
        if self._pool[0] != self.version:
            pool = self.online - self._held
            self._pool = (self.version, pool - self.reserved if self.strict else pool)
        return self._pool[1]

    def available(self) -> CPUs:
        """availableCpus for CCIAdmit and the static policy: online − reserved − every held CPU."""
        return self.online - self.reserved - self._held

    def effective(self, rec: Record) -> CPUs:
        """The cpuset the runtime must apply to a container (docs/spec.md S3.3); cached per held-set version."""
        cached = self._effective.get(rec.key)
        if cached is not None and cached[0] == self.version and cached[1] is rec:
            return cached[2]
        value = self._compute_effective(rec)
        self._effective[rec.key] = (self.version, rec, value)
        return value

    def _compute_effective(self, rec: Record) -> CPUs:
        if not rec.running:
            return frozenset()
        if rec.source == SHARED:
            return self.shared_pool
        if rec.source == STATIC:
            return rec.exclusive
        cpus = rec.exclusive
        if rec.shared_cpus:
            # exclusive grants always win over SHARED groups (docs/spec.md §2)
            cpus = cpus | (rec.shared_cpus - (self._held - rec.held))
            if not cpus:
                return self.shared_pool
        return cpus

    # ---- changes ----
    def take_dirty(self) -> set[Key]:
        dirty, self.dirty = self.dirty, set()
        return dirty

    def add(self, rec: Record) -> None:
        if rec.key in self.records:
            raise StoreInvariantError(f"container {rec.key} is already in the store")
        self._check_record(rec)
        if rec.container_id in self._ids:
            raise StoreInvariantError(f"container {rec.key} reuses the id of {self._ids[rec.container_id]}")
        if rec.held & self._held:
            raise StoreInvariantError(f"container {rec.key} would take held CPUs "
                                      f"{format_cpulist(rec.held & self._held)}")
        self.records[rec.key] = rec
        self._pods.setdefault(rec.pod_uid, []).append(rec.key)
        self.dirty.add(rec.key)
        self._changed.add(rec.key)
        self._ids[rec.container_id] = rec.key
        self._held_size += len(rec.held)
        self._set_held(self._held | rec.held)

    def remove(self, key: Key) -> Record | None:
        rec = self.records.pop(key, None)
        if rec is not None:
            keys = self._pods.get(key[0], [])
            if key in keys:
                keys.remove(key)
            if not keys:
                self._pods.pop(key[0], None)
            self.dirty.add(key)
            self._changed.add(key)
            self._effective.pop(key, None)
            self._ids.pop(rec.container_id, None)
            self._held_size -= len(rec.held)
            self._set_held(self._held - rec.held)
        return rec

    def stop(self, key: Key) -> Record | None:
        """Mark a container stopped: it keeps its record but holds nothing (its CPUs go back to the pool)."""
        rec = self.records.get(key)
        if rec is None:
            return None
        self._set_held(self._held - rec.held)
        self._held_size -= len(rec.held)
        self.dirty.add(key)
        self._changed.add(key)
        self.records[key] = replace(rec, running=False, exclusive=frozenset(), withheld=frozenset(),
                                    shared_cpus=frozenset(), groups=())
        return rec

    def pod_keys(self, pod_uid: str) -> list[Key]:
        return [k for k in self._pods.get(pod_uid, ()) if k in self.records]

    def exclusive_map(self) -> dict[str, CPUs]:
        return {f"{k[0]}/{k[1]}": r.held for k, r in sorted(self.records.items()) if r.held}

    # ---- invariants (docs/spec.md S3.2) ----
    def check(self, applied: dict[Key, CPUs] | None = None, written: set[Key] | None = None) -> None:
        """Raise StoreInvariantError unless every invariant holds; ``applied`` = runtime cpusets by key.

        Without ``written`` (at start, in tests) and on every FULL_CHECK_EVERY-th call, everything is
        recomputed from the records: each record's own conditions, the union of held CPUs, pairwise
        disjointness, container ids, and every container's runtime cpuset. Otherwise the check costs
        O(what changed), not O(containers), because it runs on every admission: a record's own
        conditions were checked by :meth:`add` (the only way in; records are immutable), disjointness
        and unique ids follow from the running totals add/remove/stop keep (which the full check
        verifies), and runtime cpusets are compared for the containers changed on either side since
        the last comparison (all of them when the held set changed): any other container's cpuset and
        store value are both as they were when last found equal.
        """
        records = self.records
        full = written is None or self._checks % FULL_CHECK_EVERY == 0
        self._checks += 1
        if full:
            self._check_from_records()
        elif len(self._ids) != len(records):
            raise StoreInvariantError("a container id is used twice (or the id index is stale)")
        elif self._held_size != len(self._held):
            raise StoreInvariantError("two containers hold the same CPU (exclusive sets not pairwise disjoint)")
        pool = self.shared_pool
        rest = self.reserved if self.strict else frozenset()
        if not pool.isdisjoint(self._held) or (pool | self._held | rest) != self.online:
            raise StoreInvariantError("shared pool != online − reserved(strict) − held")
        if applied is None:
            return
        if full or self._compared_version != self.version:
            keys = records.keys()
        else:
            keys = [k for k in self._changed | written if k in records]
        cache, version, effective = self._effective, self.version, self.effective
        for key in keys:
            rec = records[key]
            hit = cache.get(key)
            want = hit[2] if hit is not None and hit[0] == version and hit[1] is rec else effective(rec)
            got = applied.get(key, _EMPTY)
            if got is not want and got != want:
                raise StoreInvariantError(f"{key}: runtime cpuset {format_cpulist(got)!r} != store "
                                          f"{format_cpulist(want)!r}")
        self._changed.clear()
        self._compared_version = version

    def _check_from_records(self) -> None:
        values = self.records.values()
        for rec in values:
            self._check_record(rec)
        holders = [r.held for r in values if r.held]
        union = frozenset().union(*holders)
        ids = set(map(_container_id, values))
        if len(ids) != len(self.records) or ids != self._ids.keys():
            raise StoreInvariantError("a container id is used twice (or the id index is stale)")
        if sum(map(len, holders)) != len(union) or self._held_size != len(union):
            raise StoreInvariantError("two containers hold the same CPU (exclusive sets not pairwise disjoint)")
        if union != self._held:
            raise StoreInvariantError("held-CPU cache differs from the records")

    def _check_record(self, rec: Record) -> None:
        if not rec.held <= self.online:
            raise StoreInvariantError(f"{rec.key}: holds offline or unknown CPUs "
                                      f"{format_cpulist(rec.held - self.online)}")
        if not rec.held.isdisjoint(self.reserved):
            raise StoreInvariantError(f"{rec.key}: holds reserved CPUs {format_cpulist(rec.held & self.reserved)}")
        if not rec.exclusive.isdisjoint(rec.withheld):
            raise StoreInvariantError(f"{rec.key}: a CPU is both granted and withheld")


def _container_id(rec: Record) -> str:
    return rec.container_id
