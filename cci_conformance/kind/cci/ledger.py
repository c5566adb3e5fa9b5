"""The contract's view of a kind worker's ledger: assignments and container states from the kubelet's files."""

from __future__ import annotations

from ...cpuset import CPUs, parse_cpulist
from ...node.api import ContainerAssignment, ContainerState, SnapshotError
from .node_view import Ledger, RuntimeContainer, runtime_containers


def effective(record: dict, read: Ledger) -> CPUs:
    """The cpuset the patched kubelet gives a CCI container (manager.go Effective, docs/spec.md S3.3): its
    exclusive CPUs plus its SHARED groups minus what others hold, or the shared pool when that is empty."""
    exclusive = parse_cpulist(record["exclusive"])
    held = exclusive | parse_cpulist(record["withheld"])
    shared = parse_cpulist(record["shared"])
    cpus = exclusive
    if shared:
        cpus = cpus | (shared - (read.assigned() - held))
    return cpus or read.shared_pool()


def _placement(read: Ledger, pod_uid: str, container: str) -> tuple[str, CPUs, bool, dict | None]:
    """(source, store cpus, exclusive, CCI record) of one container, from the two checkpoints."""
    record = next((r for r in read.cci["containers"] if (r["podUID"], r["container"]) == (pod_uid, container)), None)
    if record is not None:
        return "cci", effective(record, read), bool(record["exclusive"]), record
    static = read.cpu.get(pod_uid, container)
    if static is not None:
        return "static", static, True, None
    return "shared", read.shared_pool(), False, None


def _container_id(status: dict) -> str:
    return status.get("containerID", "").split("://", 1)[-1]


def _runtime_of(pod: dict,
                runtime: dict[tuple[str, str], RuntimeContainer]) -> list[tuple[str, RuntimeContainer, bool]]:
    """(name, runtime container, running) of every container of ``pod`` the runtime was asked to create, in the
    pod's order. The runtime is the source: the API server reports a container a PLEG relist (up to a second)
    after it started, and a container it has not reported yet must still be in every check (ACCT-008). Where the
    API server does report a container, it must be the one the recorder saw created, and one it reports
    terminated is not running."""
    meta = pod["metadata"]
    reported = {s["name"]: s for s in pod.get("status", {}).get("containerStatuses", [])}
    out = []
    for spec in pod["spec"]["containers"]:
        name = spec["name"]
        found = runtime.get((meta["uid"], name))
        status = reported.get(name, {})
        cid = _container_id(status)
        if cid and (found is None or found.container_id != cid):
            raise SnapshotError(f"container {cid[:12]} of {meta['namespace']}/{meta['name']} has no create in the "
                                "recorder log: the runtime's cpuset of this container is unknown")
        if found is None:
            continue  # not created yet: the runtime has nothing
        if found.cpus is None:
            raise SnapshotError(f"container {found.container_id[:12]} of {meta['namespace']}/{meta['name']} has no "
                                "cpuset in the recorder log: the runtime's cpuset of this container is unknown")
        terminated = bool(cid) and bool(status.get("state", {}).get("terminated"))
        out.append((name, found, found.started and not terminated))
    return out


def assignments(pod: dict, read: Ledger) -> tuple[ContainerAssignment, ...]:
    """The AdmissionResult containers of an admitted pod (its Kubernetes uid), as the kubelet's checkpoints hold
    them, each with the id of the container the runtime runs."""
    real = pod["metadata"]["uid"]
    out = []
    for name, found, _ in _runtime_of(pod, runtime_containers(read.recorder)):
        source, cpus, exclusive, record = _placement(read, real, name)
        groups = tuple(parse_cpulist(g["cpuset"]) for g in record["groups"]) if record else ()
        out.append(ContainerAssignment(real, name, found.container_id, cpus, exclusive, source, groups))
    return tuple(out)


def pod_started(pod: dict, read: Ledger) -> bool:
    """Every container of ``pod`` (its Kubernetes uid) was created and started by the runtime."""
    runtime = runtime_containers(read.recorder)
    found = [runtime.get((pod["metadata"]["uid"], c["name"])) for c in pod["spec"]["containers"]]
    return all(f is not None and f.started for f in found)


def exclusive_map(read: Ledger) -> dict[str, CPUs]:
    """Every held grant by pod/container, withheld CPUs included: cpu_manager_state's assignments in coexistence
    (static and CCI, one store: patch 0001), the CCI records in alpha (the none policy holds nothing)."""
    if read.cci["mode"] == "alpha":
        held = {f"{r['podUID']}/{r['container']}": parse_cpulist(r["exclusive"]) | parse_cpulist(r["withheld"])
                for r in read.cci["containers"]}
        return {key: cpus for key, cpus in held.items() if cpus}
    return {f"{pod}/{name}": frozenset(cpus) for pod, cs in read.cpu.entries.items()
            for name, cpus in cs.items()}


def containers_of(pods: list[dict], read: Ledger) -> tuple[ContainerState, ...]:
    """Every container of the backend's pods the runtime holds, with its store cpuset and the cpuset the runtime
    was last given."""
    runtime = runtime_containers(read.recorder)
    out = []
    for pod in pods:
        meta = pod["metadata"]
        for name, found, running in _runtime_of(pod, runtime):
            source, cpus, exclusive, record = _placement(read, meta["uid"], name)
            out.append(ContainerState(
                namespace=meta["namespace"], pod_name=meta["name"], pod_uid=meta["uid"],
                container=name, container_id=found.container_id, source=source, store_cpus=cpus,
                runtime_cpus=found.cpus, exclusive=exclusive, claim_uid=record["claimUID"] if record else "",
                claim_name=record["claimName"] if record else "", running=running))
    return tuple(sorted(out, key=lambda c: (c.pod_uid, c.container)))


def held_by(read: Ledger, pod_uids: set[str]) -> CPUs:
    """Every CPU the CPU manager's checkpoint assigns to a container of these pods."""
    return frozenset().union(*(cpus for uid in pod_uids for cpus in read.cpu.entries.get(uid, {}).values()))


def released(read: Ledger, pod_uids: set[str], held: CPUs) -> bool:
    """Whether the kubelet released these pods: no assignment and no CCI record left, and the CPUs they held
    (``held``, read before the deletion) back in the shared pool or assigned again. The static policy's
    RemoveContainer writes its checkpoint twice (policy_static.go: the entry deleted, then the shared pool grown):
    a read between the two writes shows the entry gone and its CPUs in neither, a state no caller may settle on
    (ACCT-008 once compared the runtime with the shared pool of such a read, on a slow host)."""
    if pod_uids & set(read.cpu.entries) or any(c["podUID"] in pod_uids for c in read.cci["containers"]):
        return False
    return held <= read.cpu.default_cpuset | read.cpu.assigned()
