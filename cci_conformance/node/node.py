"""The node's core: serial admission of pods (static, shared, CCI), removal, checkpoints and restart recovery."""

from __future__ import annotations

import logging
import secrets
import threading
import time
from dataclasses import replace

from ..cpuset import CPUs, format_cpulist
from ..protocol.protos import cci_v1alpha1_pb2 as pb
from ..topology.model import Topology
from . import cci
from .api import AdmissionResult, ContainerAssignment, OwedRemove, PodSpec
from .cci import Rejection, Timer
from .codec import owed_from_dict
from .cpumanager.qos import exclusive_cpus
from .cpumanager.quantity import QuantityError
from .profile import NodeConfig
from .runtime import Runtime
from .state_files import StateFiles
from .static import StaticAllocator
from .store import CCI, SHARED, STATIC, Key, Record, Store, StoreInvariantError
from .watcher import PluginWatcher

log = logging.getLogger("cci.node")
INVALID_POD = "InvalidPodSpec"
CCI_DISABLED = "CCIDisabled"


def _entry(driver: str, namespace: str, claim_uid: str, claim_name: str, container_id: str, pod_uid: str,
           container: str, why: str) -> dict:
    """A CCIRemoveContainerResource the node owes a driver (an in-flight admission or a removal)."""
    return {"driver": driver, "namespace": namespace, "claimUID": claim_uid, "claimName": claim_name,
            "containerID": container_id, "podUID": pod_uid, "container": container, "why": why}


def _pending(rec: Record, why: str) -> dict:
    return _entry(rec.driver, rec.namespace, rec.claim_uid, rec.claim_name, rec.container_id, rec.pod_uid,
                  rec.container, why)


def _remove_ids(entry: dict) -> list[str]:
    """container_id values to send (docs/spec.md S1.7): "" removes a claim's admissions that were never added."""
    if entry["why"] == "admission":
        return [""]
    if entry["why"] in ("gone-while-down", "add-unconfirmed"):
        # the node died between commit and CCIAddContainerResource, or the Add failed (a deadline met, the driver
        # gone): the driver may hold the admission under the container id or as never added; both ids free it
        return [entry["containerID"], ""]
    return [entry["containerID"]]


class Node:
    """Everything behind the control API; one lock makes admission serial (KEP-3675 l.922 "mutually exclusive")."""

    def __init__(self, config: NodeConfig, topology: Topology):
        self.config = config
        self.topology = topology
        self.lock = threading.RLock()
        root = config.kubelet_root
        self.store = Store(topology.online_cpus, config.reserved, config.strict_reservation)
        self.runtime = Runtime(config.runtime_root)
        self.static = StaticAllocator(topology, config) if config.policy == "static" else None
        self.files = StateFiles(root, config, self.store, self.static.policy if self.static else None)
        self.watcher = PluginWatcher(root / "plugins_registry", root / "plugins", config.plugin_poll_s,
                                     config.rpc_timeout_s, on_register=self._driver_registered)
        self.pending: list[dict] = []
        self._applied_version = -1
        self.generation = 0
        self.events: list[str] = []  # what the last start reconciled (NodeSnapshot.startup)
        self.on_fatal = None  # called with a StoreInvariantError before it propagates (the process exits)

    # ---- start and restart recovery (docs/spec.md S3.6) ----
    def start(self) -> None:
        with self.lock:
            loaded = self.files.load()  # raises CheckpointError with the file to delete
            self.generation = loaded.generation + 1
            self.pending = loaded.pending
            try:
                for rec in loaded.records:
                    self.store.add(rec)
                self.store.check()
            except StoreInvariantError as exc:  # e.g. written on another machine shape: the kubelet refuses too
                raise self.files.cci_error(f"it does not fit this machine ({exc})") from None
            self._reconcile()
            self.files.save(self.generation, self.pending)
            self.store.check(self.runtime.applied)
        self.watcher.start()

    def _reconcile(self) -> None:
        found = self.runtime.load()
        for key, rec in list(self.store.records.items()):
            if rec.running and key not in found:
                # the container went away while the node was down: forget it, tell its driver
                self.store.remove(key)
                if rec.source == CCI:
                    self.pending.append(_pending(rec, "gone-while-down"))
                self.events.append(f"removed {key[0]}/{key[1]}: container gone from the runtime")
            elif not rec.running and key in found:
                self.runtime.remove(key)
        for key in found:
            if key not in self.store.records:
                self.runtime.remove(key)  # created by an admission that never committed
                self.events.append(f"removed orphan runtime container {key[0]}/{key[1]}")
        for key, rec in self.store.records.items():
            if rec.running:
                self.runtime.apply(key, self.store.effective(rec))
        if self.pending:
            self.events.append(f"{len(self.pending)} CCIRemoveContainerResource call(s) owed to drivers")

    def stop(self) -> None:
        self.watcher.stop()

    # ---- pending CCIRemove calls (rolled-back admissions, removals the driver has not acknowledged) ----
    def _driver_registered(self, name: str) -> None:
        with self.lock:
            self._flush_pending(name)

    def _flush_pending(self, driver: str, timer: Timer | None = None) -> None:
        conn = self.watcher.get(driver)
        if conn is None:
            return
        for entry in [e for e in self.pending if e["driver"] == driver]:
            self._flush_one(conn, entry, timer or Timer())

    def _save(self) -> None:
        self.files.save(self.generation, self.pending)

    def _check(self) -> None:
        try:
            self.store.check(self.runtime.applied, self.runtime.take_written())
        except StoreInvariantError as exc:  # a node bug: stop loudly rather than go on with a wrong store
            log.critical("store invariant violated: %s", exc)
            if self.on_fatal is not None:
                self.on_fatal(exc)
            raise

    # ---- admission ----
    def create_pod(self, pod: PodSpec) -> AdmissionResult:
        with self.lock:
            start = time.perf_counter()
            timer = Timer()
            try:
                records = self._admit(pod, timer)
            except Rejection as rej:
                return AdmissionResult(False, rej.reason, rej.message, node_seconds=time.perf_counter() - start,
                                       driver_seconds=timer.seconds)
            try:
                self._create_containers(records, timer)
            except Rejection as rej:
                self._remove_records([r.key for r in records], timer, why="add-unconfirmed")
                return AdmissionResult(False, rej.reason, rej.message, node_seconds=time.perf_counter() - start,
                                       driver_seconds=timer.seconds)
            assignments = tuple(
                ContainerAssignment(r.pod_uid, r.container, r.container_id, self.store.effective(r),
                                    bool(r.exclusive), r.source, tuple(c for c, _ in r.groups)) for r in records)
            return AdmissionResult(True, containers=assignments, node_seconds=time.perf_counter() - start,
                                   driver_seconds=timer.seconds)

    def _validate_pod(self, pod: PodSpec) -> None:
        if not pod.uid or not pod.name or not pod.containers:
            raise Rejection(INVALID_POD, "a pod needs a uid, a name and at least one container")
        if self.store.pod_keys(pod.uid):
            raise Rejection(INVALID_POD, f"pod {pod.uid} already exists on this node")
        names = [c.name for c in pod.containers]
        if len(set(names)) != len(names) or not all(names) or any("/" in n or n.startswith(".") for n in names):
            raise Rejection(INVALID_POD, f"container names must be unique, non-empty path segments: {names}")
        claims = {c.name for c in pod.claims}
        for c in pod.containers:
            if c.claim is not None and c.claim not in claims:
                raise Rejection(INVALID_POD, f"container {c.name!r} uses claim {c.claim!r}, which the pod lacks")

    def _admit(self, pod: PodSpec, timer: Timer) -> list[Record]:
        """Decide every container's CPUs; on any refusal undo the driver grants made so far and re-raise."""
        self._validate_pod(pod)
        claims = {c.name: c for c in pod.claims}
        done: list[Record] = []
        taken: CPUs = frozenset()
        try:
            for spec in pod.containers:
                container_id = secrets.token_hex(32)
                if spec.claim is not None:
                    rec = self._admit_cci(pod, spec.name, container_id, claims[spec.claim],
                                          self.store.available() - taken, timer)
                else:
                    base = Record(pod.uid, spec.name, pod.namespace, pod.name, container_id, SHARED)
                    try:
                        num = exclusive_cpus(pod, spec) if self.static is not None else 0
                    except QuantityError as exc:
                        raise Rejection(INVALID_POD, str(exc)) from None
                    if num:
                        cpus = self.static.allocate(num, self.store.shared_pool - taken,
                                                    self.store.available() - taken)
                        rec = replace(base, source=STATIC, exclusive=cpus)
                    else:
                        rec = base
                done.append(rec)
                taken |= rec.held
        except Rejection:
            self._undo_grants(done, timer)
            raise
        # commit: records in, their admission intents resolved, in one checkpoint write
        ids = {r.container_id for r in done}
        self.pending = [e for e in self.pending if not (e["why"] == "admission" and e["containerID"] in ids)]
        try:
            for rec in done:
                self.store.add(rec)
        except StoreInvariantError as exc:
            log.critical("store invariant violated: %s", exc)
            if self.on_fatal is not None:
                self.on_fatal(exc)
            raise
        self._save()
        return done

    def _admit_cci(self, pod: PodSpec, container: str, container_id: str, claim, available: CPUs,
                   timer: Timer) -> Record:
        if not self.config.cci:
            raise Rejection(CCI_DISABLED, "this node has CCI turned off (profile cci: false)")
        driver = claim.driver or (self.watcher.names()[0] if len(self.watcher.names()) == 1 else "")
        conn = self.watcher.get(driver) if driver else None
        if conn is None:
            have = ", ".join(self.watcher.names()) or "none"
            wanted = claim.driver or "(the only one)"
            raise Rejection(cci.DRIVER_NOT_REGISTERED,
                            f"claim {claim.name!r} needs driver {wanted!r}; registered: {have}")
        # intent first: a node killed during CCIAdmit rolls the claim back at restart (docs/spec.md S3.5)
        intent = _entry(conn.name, pod.namespace, claim.uid, claim.name, container_id, pod.uid, container,
                        "admission")
        self.pending.append(intent)
        self._save()
        req = cci.admit_request(pod.namespace, claim.uid, claim.name, available, pod.uid, container,
                                claim.parameters)
        try:
            resp = cci.admit(conn, req, self.config.rpc_timeout_s, timer)
            grant = cci.validate(resp, available, cci.parse_handle(req.resource_handle), self.topology)
        except Rejection as rej:
            if not rej.driver_may_hold:  # the driver said no: nothing to roll back
                self.pending.remove(intent)
                self._save()
            else:
                self._flush_one(conn, intent, timer)
            raise
        return Record(pod.uid, container, pod.namespace, pod.name, container_id, CCI, exclusive=grant.exclusive,
                      withheld=grant.withheld, shared_cpus=grant.shared, groups=grant.groups, claim_uid=claim.uid,
                      claim_name=claim.name, driver=conn.name)

    def _flush_one(self, conn, entry: dict, timer: Timer) -> None:
        """Send the CCIRemoveContainerResource calls an entry owes; drop it once the driver acknowledged."""
        for container_id in _remove_ids(entry):
            req = pb.RemoveResourceRequest(namespace=entry["namespace"], claim_uid=entry["claimUID"],
                                           claim_name=entry["claimName"], container_id=container_id)
            err = cci.remove(conn, req, self.config.rpc_timeout_s, timer)
            if err:
                log.warning("CCIRemoveContainerResource(%s) to %s failed: %s (will retry)",
                            container_id or "<never added>", conn.name, err)
                return
        self.pending.remove(entry)
        self._save()

    def _undo_grants(self, done: list[Record], timer: Timer) -> None:
        for rec in done:
            if rec.source != CCI:
                continue
            entry = next(e for e in self.pending if e["containerID"] == rec.container_id)
            conn = self.watcher.get(rec.driver)
            if conn is not None:
                self._flush_one(conn, entry, timer)

    def _create_containers(self, records: list[Record], timer: Timer) -> None:
        """Runtime create + CCIAddContainerResource (KEP flow "Add"), then shared pools follow."""
        for rec in records:
            self.runtime.create(rec.key, self.store.effective(rec))
            if rec.source == CCI:
                conn = self.watcher.get(rec.driver)
                if conn is None:
                    raise Rejection(cci.DRIVER_NOT_REGISTERED, f"driver {rec.driver!r} went away before "
                                                               "CCIAddContainerResource")
                cci.add(conn, pb.AddResourceRequest(cgroup=self.runtime.cgroup_dir(rec.key), pod=rec.pod_uid,
                                                    container=rec.container, container_id=rec.container_id),
                        self.config.rpc_timeout_s, timer)
        self._reapply()
        self._check()

    def _reapply(self) -> None:
        """Rewrite non-exclusive cpusets after the pool changed (the kubelet's reconcile loop does this)."""
        if self._applied_version == self.store.version:
            return
        self._applied_version = self.store.version
        for key, rec in self.store.records.items():
            if rec.running and rec.source != STATIC:
                self.runtime.apply(key, self.store.effective(rec))

    # ---- removal ----
    def delete_pod(self, pod_uid: str) -> None:
        with self.lock:
            self._remove_records(self.store.pod_keys(pod_uid), None)

    def stop_container(self, pod_uid: str, container: str) -> None:
        with self.lock:
            self._remove_records([(pod_uid, container)], None, keep_stopped=True)

    def _remove_records(self, keys: list[Key], timer: Timer | None, keep_stopped: bool = False,
                        why: str = "removal") -> None:
        owed = []
        changed = False
        for key in keys:
            rec = self.store.records.get(key)
            if rec is None or not rec.running:
                if rec is not None and not keep_stopped:
                    self.store.remove(key)
                    changed = True
                continue
            if keep_stopped:
                self.store.stop(key)
            else:
                self.store.remove(key)
            changed = True
            if rec.source == CCI:
                entry = _pending(rec, why)
                self.pending.append(entry)
                owed.append(entry)
        if not changed:
            return
        self._save()  # the store forgets first; the driver is told after (a crash in between re-sends at restart)
        for key in keys:
            self.runtime.remove(key)
        self._reapply()
        self._check()
        for entry in owed:
            conn = self.watcher.get(entry["driver"])
            if conn is not None:
                self._flush_one(conn, entry, timer or Timer())

    # ---- observation ----
    def pods(self) -> dict[str, list[Record]]:
        with self.lock:
            out: dict[str, list[Record]] = {}
            for rec in self.store.records.values():
                out.setdefault(rec.pod_uid, []).append(rec)
            return out

    def owed(self) -> tuple[OwedRemove, ...]:
        """The Removes owed to drivers, as the contract reports them (NodeSnapshot.pending)."""
        return tuple(owed_from_dict(e) for e in self.pending)

    def shared_pool_text(self) -> str:
        return format_cpulist(self.store.shared_pool)
