"""The kubelet's DRA checkpoint, CPU manager checkpoint and DRA histograms, read into the contract's types."""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable

from ..cpu_manager_state import loads as load_cpu_manager
from .api import CpuManagerView, Histogram, KubeletCheckpoints, KubeletMetrics, PreparedClaim

DRA_STATE_PATH = "/var/lib/kubelet/dra_manager_state"
CPU_STATE_PATH = "/var/lib/kubelet/cpu_manager_state"
NODE_PREPARE_METRIC = "dra_grpc_operations_duration_seconds"
PREPARE_RESOURCES_METRIC = "dra_operations_duration_seconds"
# the service name differs by DRA API version (v1, v1beta1): the method is matched by its end
NODE_PREPARE_METHOD = "/NodePrepareResources"


class CheckpointError(ValueError):
    """A checkpoint file the kubelet itself would refuse (bad JSON, wrong checksum)."""


def prepared_claims(text: str, path: str = DRA_STATE_PATH) -> tuple[PreparedClaim, ...]:
    """``dra_manager_state``: {"Data": <JSON>, "Checksum": crc32-IEEE of Data} (pkg/kubelet/cm/dra/state/checkpoint.go);
    Data holds ClaimInfoStateList, Go's default field names, PodUIDs a set (a JSON object of empty values)."""
    if not text.strip():
        return ()  # no claim was ever prepared on this node
    try:
        outer = json.loads(text)
        data = outer["Data"]
        if zlib.crc32(data.encode()) != int(outer["Checksum"]):
            raise CheckpointError(f"{path}: checksum {outer['Checksum']} does not match its Data")
        claims = json.loads(data).get("ClaimInfoStateList") or []
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: not a DRA checkpoint ({exc})") from None
    out = []
    for entry in claims:
        devices = tuple((driver, d.get("PoolName", ""), d.get("DeviceName", ""))
                        for driver, state in sorted((entry.get("DriverState") or {}).items())
                        for d in (state or {}).get("Devices") or [])
        out.append(PreparedClaim(str(entry.get("ClaimUID", "")), entry.get("ClaimName", ""),
                                 entry.get("Namespace", ""), frozenset(entry.get("PodUIDs") or {}), devices))
    return tuple(out)


def cpu_manager(data: bytes, path: str = CPU_STATE_PATH) -> CpuManagerView:
    state = load_cpu_manager(data, path=path)
    assigned = tuple((pod, container, frozenset(cpus)) for pod, containers in sorted(state.entries.items())
                     for container, cpus in sorted(containers.items()))
    return CpuManagerView(state.policy_name, frozenset(state.default_cpuset), assigned)


def checkpoints(dra_text: str, cpu_bytes: bytes) -> KubeletCheckpoints:
    return KubeletCheckpoints(prepared_claims(dra_text), cpu_manager(cpu_bytes))


def histogram(text: str, name: str, match: Callable[[dict[str, str]], bool]) -> Histogram:
    """The series of histogram ``name`` whose labels ``match``, summed (empty when none matched)."""
    from prometheus_client.parser import text_string_to_metric_families

    buckets: dict[float, int] = {}
    count, total = 0, 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.startswith(name) or not match(sample.labels):
                continue
            if sample.name == name + "_bucket":
                bound = float(sample.labels["le"])
                buckets[bound] = buckets.get(bound, 0) + int(sample.value)
            elif sample.name == name + "_count":
                count += int(sample.value)
            elif sample.name == name + "_sum":
                total += float(sample.value)
    return Histogram(name, tuple(sorted(buckets.items())), count, total)


def metrics(text: str, driver: str) -> KubeletMetrics:
    """The two DRA histograms of the kubelet's /metrics text (subsystem "dra", pkg/kubelet/metrics). Only successful
    calls count: a failed one carries its gRPC code, or is_error="true" (1.34 had that label inverted)."""
    node_prepare = histogram(text, NODE_PREPARE_METRIC, lambda labels: (
        labels.get("driver_name") == driver and labels.get("method_name", "").endswith(NODE_PREPARE_METHOD)
        and labels.get("grpc_status_code") == "OK"))
    prepare = histogram(text, PREPARE_RESOURCES_METRIC, lambda labels: (
        labels.get("operation_name") == "PrepareResources" and labels.get("is_error") == "false"))
    return KubeletMetrics(node_prepare, prepare)
