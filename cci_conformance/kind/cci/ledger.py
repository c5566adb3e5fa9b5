"""The contract's view of a kind worker's ledger: assignments and container states from the kubelet's files."""

from __future__ import annotations

from ...cpuset import CPUs, parse_cpulist
from ...node.api import ContainerAssignment, ContainerState, SnapshotError
from .node_view import Ledger, recorded_cpusets


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


def assignments(pod: dict, read: Ledger) -> tuple[ContainerAssignment, ...]:
    """The AdmissionResult containers of an admitted pod (its Kubernetes uid), as the kubelet's checkpoints hold
    them."""
    real = pod["metadata"]["uid"]
    out = []
    for status in pod["status"]["containerStatuses"]:
        source, cpus, exclusive, record = _placement(read, real, status["name"])
        groups = tuple(parse_cpulist(g["cpuset"]) for g in record["groups"]) if record else ()
        out.append(ContainerAssignment(real, status["name"], _container_id(status), cpus, exclusive, source,
                                       groups))
    order = [c["name"] for c in pod["spec"]["containers"]]
    return tuple(sorted(out, key=lambda a: order.index(a.container)))


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
    """Every container of the backend's pods with its store cpuset and the cpuset the runtime was last given."""
    recorded = recorded_cpusets(read.recorder)
    out = []
    for pod in pods:
        meta = pod["metadata"]
        for status in pod["status"].get("containerStatuses", []):
            cid = _container_id(status)
            if not cid:
                continue  # not created yet: the runtime has nothing
            if cid not in recorded:
                raise SnapshotError(f"container {cid[:12]} of {meta['namespace']}/{meta['name']} has no cpuset in "
                                    "the recorder log: the runtime's cpuset of this container is unknown")
            source, cpus, exclusive, record = _placement(read, meta["uid"], status["name"])
            out.append(ContainerState(
                namespace=meta["namespace"], pod_name=meta["name"], pod_uid=meta["uid"],
                container=status["name"], container_id=cid, source=source, store_cpus=cpus,
                runtime_cpus=recorded[cid], exclusive=exclusive, claim_uid=record["claimUID"] if record else "",
                claim_name=record["claimName"] if record else "",
                running=bool(status["state"].get("running"))))
    return tuple(sorted(out, key=lambda c: (c.pod_uid, c.container)))
