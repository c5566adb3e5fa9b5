"""The policy base class: admission bookkeeping done once, with each step an overridable method."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ..cpuset import CPUs, format_cpulist, parse_cpulist
from ..protocol.claims import ClaimRequest, CoreGroup, parse_claim
from ..topology.model import Topology

SNAPSHOT_KEY = "snapshot"


def entry_key(key: tuple[str, str]) -> str:
    """The state-store key of the admission of (pod, container)."""
    return json.dumps(list(key), separators=(",", ":"))


class PolicyError(Exception):
    """A refusal: its message travels to the kubelet in the reply's ``err`` field."""


@dataclass(frozen=True)
class AdmitCall:
    """A decoded AdmitRequest (docs/spec.md S1.4)."""

    namespace: str
    claim_uid: str
    claim_name: str
    available: CPUs
    pod: str
    container: str
    resource_handle: str


@dataclass(frozen=True)
class Grant:
    """The CPUs of one core group; ``withheld`` are CPUs no other admission may get while it lives."""

    cpus: CPUs
    exclusive: bool
    withheld: CPUs = frozenset()


@dataclass
class Admission:
    """One admitted container: its claim, its grants per group and, once added, its container id."""

    namespace: str
    claim_uid: str
    claim_name: str
    pod: str
    container: str
    resource_handle: str
    groups: tuple[Grant, ...]
    container_id: str = ""
    cgroup: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return (self.pod, self.container)

    @property
    def cpuset(self) -> CPUs:
        return frozenset().union(*(g.cpus for g in self.groups))

    @property
    def exclusive(self) -> bool:
        return any(g.exclusive for g in self.groups)

    @property
    def withheld(self) -> CPUs:
        return frozenset().union(*(g.withheld for g in self.groups))

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace, "claim_uid": self.claim_uid, "claim_name": self.claim_name,
            "pod": self.pod, "container": self.container, "resource_handle": self.resource_handle,
            "container_id": self.container_id, "cgroup": self.cgroup, "extra": self.extra,
            "groups": [{"cpus": format_cpulist(g.cpus), "exclusive": g.exclusive,
                        "withheld": format_cpulist(g.withheld)} for g in self.groups],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Admission:
        groups = tuple(Grant(parse_cpulist(g["cpus"]), bool(g["exclusive"]), parse_cpulist(g["withheld"]))
                       for g in d["groups"])
        return cls(namespace=d["namespace"], claim_uid=d["claim_uid"], claim_name=d["claim_name"], pod=d["pod"],
                   container=d["container"], resource_handle=d["resource_handle"], groups=groups,
                   container_id=d.get("container_id", ""), cgroup=d.get("cgroup", ""), extra=d.get("extra", {}))


class Policy:
    """Bookkeeping every CCI driver needs; a driver overrides :meth:`choose_cpus` (and, for mutants, others).

    The server calls :meth:`admit`, :meth:`add` and :meth:`remove` one at a time. A method that refuses
    raises :class:`PolicyError`; it must not have changed anything by then (docs/spec.md S1.6).
    """

    #: capabilities this policy honours (parse_claim refuses ranges without `core-ranges`)
    capabilities: tuple[str, ...] = ()

    def __init__(self, topology: Topology):
        self.topology = topology
        self.admissions: dict[tuple[str, str], Admission] = {}
        self._withheld: CPUs = frozenset()
        self._dict_cache: dict[tuple[str, str], tuple[Admission, dict[str, Any], str]] = {}

    # ---------------- RPC entry points ----------------
    def admit(self, call: AdmitCall) -> Admission:
        existing = self.admissions.get((call.pod, call.container))
        if existing is not None:
            if self.same_admission(existing, call):
                return existing  # idempotent: same container, same claim -> same answer (S1.5)
            raise PolicyError(f"container {call.container!r} of pod {call.pod} is already admitted with claim "
                              f"{existing.claim_uid}; remove it before admitting it again")
        claim = self.validate_request(call)
        usable = self.usable_cpus(call)
        chosen = self.choose_cpus(claim, usable)
        grants = self.make_grants(claim, chosen)
        admission = Admission(namespace=call.namespace, claim_uid=call.claim_uid, claim_name=call.claim_name,
                              pod=call.pod, container=call.container, resource_handle=call.resource_handle,
                              groups=grants)
        self.record(admission)
        return admission

    def add(self, pod: str, container: str, container_id: str, cgroup: str) -> None:
        admission = self.admissions.get((pod, container))
        if admission is None:
            raise PolicyError(f"container {container!r} of pod {pod} was never admitted; call CCIAdmit first")
        if not container_id:
            raise PolicyError("container_id is empty; send the runtime's container id")
        holder = self.find_by_container_id(container_id)
        if holder is not None and holder is not admission:
            raise PolicyError(f"container id {container_id} already belongs to container {holder.container!r} "
                              f"of pod {holder.pod}")
        # a restarted container gets a new id: the latest one wins
        self.admissions[admission.key] = replace(admission, container_id=container_id, cgroup=cgroup)

    def remove(self, namespace: str, claim_uid: str, claim_name: str, container_id: str) -> None:
        if container_id:
            targets = [a for a in self.admissions.values() if a.container_id == container_id]
        else:  # never added (e.g. the pod failed to start): release the claim's un-added admissions (S1.7)
            targets = [a for a in self.admissions.values() if a.claim_uid == claim_uid and not a.container_id]
        for a in targets:
            if claim_uid and a.claim_uid != claim_uid:
                raise PolicyError(f"container id {container_id} holds claim {a.claim_uid}, not {claim_uid}")
        for a in targets:
            self.release(a)

    # ---------------- overridable steps ----------------
    def same_admission(self, existing: Admission, call: AdmitCall) -> bool:
        return existing.claim_uid == call.claim_uid and existing.resource_handle == call.resource_handle

    def validate_request(self, call: AdmitCall) -> ClaimRequest:
        if not call.pod or not call.container or not call.claim_uid:
            raise PolicyError("pod, container and claim_uid are required")
        return parse_claim(call.resource_handle, self.topology, self.capabilities)

    def usable_cpus(self, call: AdmitCall) -> CPUs:
        """availableCpus, minus CPUs this driver withholds itself (even if the node offers them by mistake)."""
        return (call.available & self.topology.online_cpus) - self._withheld

    def choose_cpus(self, claim: ClaimRequest, usable: CPUs) -> list[CPUs]:
        """One CPU set per core group, drawn from ``usable``; raise PolicyError when it cannot be done."""
        raise NotImplementedError

    def make_grants(self, claim: ClaimRequest, chosen: list[CPUs]) -> tuple[Grant, ...]:
        if len(chosen) != len(claim.groups):
            raise PolicyError(f"internal: {len(chosen)} cpusets for {len(claim.groups)} groups")
        pairs = zip(claim.groups, chosen, strict=True)
        return tuple(Grant(cpus, g.exclusive, self.withheld_for(g, cpus)) for g, cpus in pairs)

    def withheld_for(self, group: CoreGroup, cpus: CPUs) -> CPUs:
        """Exclusive CPUs are withheld; CORE-SIBLING-DENIED withholds the idle siblings too (S2.4)."""
        if not group.exclusive:
            return frozenset()
        if group.siblings == "denied":
            return frozenset().union(*(self.topology.core_of[c] for c in cpus)) if cpus else frozenset()
        return cpus

    def record(self, admission: Admission) -> None:
        self.admissions[admission.key] = admission
        self._withheld = self._withheld | admission.withheld

    def release(self, admission: Admission) -> None:
        self.admissions.pop(admission.key, None)
        self._withheld = self.withheld_now()

    # ---------------- helpers and state ----------------
    def find_by_container_id(self, container_id: str) -> Admission | None:
        return next((a for a in self.admissions.values() if a.container_id == container_id), None)

    def withheld_now(self) -> CPUs:
        return frozenset().union(*(a.withheld for a in self.admissions.values()))

    def snapshot(self) -> dict[str, Any]:
        """The state to persist (a subclass with more state extends this and :meth:`restore`)."""
        return {"admissions": [self._cached(key, a)[0] for key, a in self.admissions.items()]}

    def snapshot_text(self) -> str:
        """``snapshot()`` as canonical JSON (sorted keys, no spaces); per-admission text is cached, so a
        change costs one admission's encoding, not the whole state's (admission latency, S1.8)."""
        if type(self).snapshot is not Policy.snapshot:
            return json.dumps(self.snapshot(), sort_keys=True, separators=(",", ":"))
        parts = [self._cached(key, a)[1] for key, a in self.admissions.items()]
        if len(self._dict_cache) > len(self.admissions):
            self._dict_cache = {k: v for k, v in self._dict_cache.items() if k in self.admissions}
        return '{"admissions":[' + ",".join(parts) + "]}"

    def _cached(self, key: tuple[str, str], a: Admission) -> tuple[dict[str, Any], str]:
        hit = self._dict_cache.get(key)
        if hit is None or hit[0] is not a:
            d = a.to_dict()
            hit = (a, d, json.dumps(d, sort_keys=True, separators=(",", ":")))
            self._dict_cache[key] = hit
        return hit[1], hit[2]

    def entry_changes(self, token: tuple[dict[tuple[str, str], Admission], CPUs]) -> tuple[dict[str, str], list[str]]:
        """What changed since ``token`` as state-store entries: (key -> canonical JSON text, deleted keys).
        One entry per admission, so a change costs one admission's encoding; a subclass that extends
        :meth:`snapshot` persists its whole snapshot under SNAPSHOT_KEY instead."""
        if type(self).snapshot is not Policy.snapshot:
            return ({SNAPSHOT_KEY: self.snapshot_text()}, []) if self.changed_since(token) else ({}, [])
        before = token[0]
        put = {entry_key(k): self._cached(k, a)[1] for k, a in self.admissions.items() if before.get(k) is not a}
        deleted = [k for k in before if k not in self.admissions]
        for k in deleted:
            self._dict_cache.pop(k, None)
        return put, [entry_key(k) for k in deleted]

    def restore_entries(self, entries: dict[str, Any]) -> None:
        """:meth:`restore` from the state store's entries (see :meth:`entry_changes`)."""
        if SNAPSHOT_KEY in entries:
            self.restore(entries[SNAPSHOT_KEY])
        else:
            self.restore({"admissions": list(entries.values())})

    def checkpoint(self) -> tuple[dict[tuple[str, str], Admission], CPUs]:
        """A cheap token to undo a failed call (admissions are replaced, never changed in place)."""
        return dict(self.admissions), self._withheld

    def rollback(self, token: tuple[dict[tuple[str, str], Admission], CPUs]) -> None:
        self.admissions, self._withheld = dict(token[0]), token[1]

    def changed_since(self, token: tuple[dict[tuple[str, str], Admission], CPUs]) -> bool:
        before = token[0]
        return len(before) != len(self.admissions) or any(
            before.get(k) is not a for k, a in self.admissions.items())

    def restore(self, data: dict[str, Any]) -> None:
        admissions = [Admission.from_dict(d) for d in data.get("admissions", [])]
        online = self.topology.online_cpus
        for a in admissions:
            if not a.cpuset <= online:
                raise ValueError(f"saved admission {a.pod}/{a.container} holds CPUs "
                                 f"{format_cpulist(a.cpuset - online)} that this machine does not have online")
        self.admissions = {a.key: a for a in admissions}
        self._withheld = self.withheld_now()

    def held_cpus(self, admissions: Iterable[Admission] | None = None) -> CPUs:
        return frozenset().union(*(a.cpuset for a in (admissions or self.admissions.values())))
