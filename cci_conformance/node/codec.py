"""JSON encoding of the node control value types (node/api.py) for the control API: CPU sets as cpulists."""

from __future__ import annotations

import json
from typing import Any

from ..cpuset import format_cpulist, parse_cpulist
from .api import (
    AdmissionResult,
    ClaimRef,
    ContainerAssignment,
    ContainerSpec,
    ContainerState,
    NodeSnapshot,
    OwedRemove,
    PodSpec,
    SnapshotError,
)


class CodecError(ValueError):
    """A control-API payload that does not describe the value type."""


def pod_to_json(pod: PodSpec) -> str:
    return json.dumps({
        "namespace": pod.namespace, "name": pod.name, "uid": pod.uid,
        "containers": [{"name": c.name, "cpuRequest": c.cpu_request, "cpuLimit": c.cpu_limit,
                        "memoryRequest": c.memory_request, "memoryLimit": c.memory_limit, "claim": c.claim}
                       for c in pod.containers],
        "claims": [{"name": c.name, "uid": c.uid, "parameters": c.parameters, "driver": c.driver} for c in pod.claims],
    })


def pod_from_json(text: str) -> PodSpec:
    try:
        d = json.loads(text)
        return PodSpec(
            namespace=str(d["namespace"]), name=str(d["name"]), uid=str(d["uid"]),
            containers=tuple(ContainerSpec(name=str(c["name"]), cpu_request=c.get("cpuRequest"),
                                           cpu_limit=c.get("cpuLimit"), memory_request=c.get("memoryRequest"),
                                           memory_limit=c.get("memoryLimit"), claim=c.get("claim"))
                             for c in d["containers"]),
            claims=tuple(ClaimRef(name=str(c["name"]), uid=str(c["uid"]), parameters=c.get("parameters"),
                                  driver=str(c.get("driver", ""))) for c in d.get("claims", [])),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CodecError(f"not a PodSpec: {exc!r}") from None


def _assignment(a: ContainerAssignment) -> dict[str, Any]:
    return {"podUID": a.pod_uid, "container": a.container, "containerID": a.container_id,
            "cpus": format_cpulist(a.cpus), "exclusive": a.exclusive, "source": a.source,
            "groups": [format_cpulist(g) for g in a.groups]}


def result_to_json(r: AdmissionResult) -> str:
    return json.dumps({"admitted": r.admitted, "reason": r.reason, "message": r.message,
                       "containers": [_assignment(a) for a in r.containers],
                       "nodeSeconds": r.node_seconds, "driverSeconds": r.driver_seconds})


def result_from_json(text: str) -> AdmissionResult:
    d = json.loads(text)
    return AdmissionResult(
        admitted=d["admitted"], reason=d["reason"], message=d["message"],
        containers=tuple(ContainerAssignment(
            pod_uid=a["podUID"], container=a["container"], container_id=a["containerID"],
            cpus=parse_cpulist(a["cpus"]), exclusive=a["exclusive"], source=a["source"],
            groups=tuple(parse_cpulist(g) for g in a["groups"])) for a in d["containers"]),
        node_seconds=d["nodeSeconds"], driver_seconds=d["driverSeconds"])


def snapshot_to_json(s: NodeSnapshot) -> str:
    return json.dumps({
        "mode": s.mode, "online": format_cpulist(s.online), "reserved": format_cpulist(s.reserved),
        "sharedPool": format_cpulist(s.shared_pool),
        "exclusive": {k: format_cpulist(v) for k, v in s.exclusive.items()},
        "containers": [{"namespace": c.namespace, "podName": c.pod_name, "podUID": c.pod_uid,
                        "container": c.container, "containerID": c.container_id, "source": c.source,
                        "storeCpus": format_cpulist(c.store_cpus), "runtimeCpus": format_cpulist(c.runtime_cpus),
                        "exclusive": c.exclusive, "claimUID": c.claim_uid, "claimName": c.claim_name,
                        "running": c.running}
                       for c in s.containers],
        "drivers": list(s.drivers), "nodeGeneration": s.node_generation, "policy": s.policy,
        "withheld": {k: format_cpulist(v) for k, v in s.withheld.items()},
        "pending": [owed_to_dict(o) for o in s.pending],
        "startup": list(s.startup), "refused": s.refused, "registrations": s.registrations,
    })


def owed_to_dict(o: OwedRemove) -> dict[str, str]:
    return {"driver": o.driver, "podUID": o.pod_uid, "container": o.container, "containerID": o.container_id,
            "why": o.why}


def owed_from_dict(d: dict) -> OwedRemove:
    """An owed Remove from the control API or from a ``cci_manager_state`` pending entry (same keys)."""
    return OwedRemove(driver=d["driver"], pod_uid=d["podUID"], container=d["container"],
                      container_id=d["containerID"], why=d["why"])


def snapshot_from_json(text: str) -> NodeSnapshot:
    """A NodeSnapshot; a missing or mistyped field is a SnapshotError naming it (never a default)."""
    d = json.loads(text)
    try:
        return NodeSnapshot(
            mode=d["mode"], online=parse_cpulist(d["online"]), reserved=parse_cpulist(d["reserved"]),
            shared_pool=parse_cpulist(d["sharedPool"]),
            exclusive={k: parse_cpulist(v) for k, v in d["exclusive"].items()},
            containers=tuple(ContainerState(
                namespace=c["namespace"], pod_name=c["podName"], pod_uid=c["podUID"], container=c["container"],
                container_id=c["containerID"], source=c["source"], store_cpus=parse_cpulist(c["storeCpus"]),
                runtime_cpus=parse_cpulist(c["runtimeCpus"]), exclusive=c["exclusive"], claim_uid=c["claimUID"],
                claim_name=c["claimName"], running=c["running"]) for c in d["containers"]),
            drivers=tuple(d["drivers"]), node_generation=d["nodeGeneration"], policy=d["policy"],
            withheld={k: parse_cpulist(v) for k, v in d["withheld"].items()},
            pending=tuple(owed_from_dict(o) for o in d["pending"]), startup=tuple(d["startup"]),
            refused=dict(d["refused"]), registrations=d["registrations"])
    except SnapshotError:
        raise
    except KeyError as exc:
        raise SnapshotError(f"the node's snapshot has no field {exc}") from None
    except (TypeError, AttributeError) as exc:
        raise SnapshotError(f"the node's snapshot is malformed: {exc}") from None
