"""LAT-501: the driver's NodePrepareResources calls, as the kubelet times them, against suites/dra_cpu/latency.yaml."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..errors import ConfigError
from ..paths import SUITES_DIR
from .dracpu_manifests import DRIVER_NAME
from .dracpu_scenarios import Finding

BUDGET_FILE = SUITES_DIR / "dra_cpu" / "latency.yaml"
GRPC_METRIC = "dra_grpc_operations_duration_seconds"  # kubelet pkg/kubelet/metrics: one sample per gRPC call
POD_METRIC = "dra_operations_duration_seconds"  # kubelet: one sample per pod (all its claims, kubelet work included)
PREPARE_METHOD = "/NodePrepareResources"
_LABEL = re.compile(r'(\w+)="([^"]*)"')


@dataclass(frozen=True)
class Budget:
    max_seconds: float
    min_calls: int
    max_load_per_cpu: float  # above it a call over budget is the host's queue, not a driver's verdict


def load_budget(path: Path = BUDGET_FILE) -> Budget:
    """The budget file, checked: a positive maximum in ms and a positive whole number of calls."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read the LAT-501 budget: {exc}", file=str(path),
                          fix="restore suites/dra_cpu/latency.yaml") from exc
    checks = (("preparation", "max_ms", (int, float)), ("samples", "min_calls", int),
              ("host", "max_load_per_cpu", (int, float)))
    values = []
    for section, key, kind in checks:
        value = (data.get(section) or {}).get(key)
        if isinstance(value, bool) or not isinstance(value, kind) or value <= 0:
            raise ConfigError(f"must be a positive number, got {value!r}", file=str(path), field=f"{section}.{key}",
                              fix="a positive value (max_ms: a bucket boundary of the kubelet's DRA histogram)")
        values.append(value)
    return Budget(values[0] / 1000.0, values[1], float(values[2]))


def _series(lines: list[str], name: str) -> list[tuple[str, dict[str, str], float]]:
    """(suffix, labels, value) of each Prometheus text line of histogram ``name``."""
    out = []
    for line in lines:
        head, _, rest = line.partition("{")
        if not head.startswith(name + "_") or "}" not in rest:
            continue
        labels, _, value = rest.rpartition("}")
        out.append((head[len(name) + 1:], dict(_LABEL.findall(labels)), float(value.split()[0])))
    return out


def prepare_calls(lines: list[str], driver: str = DRIVER_NAME) -> dict:
    """The driver's successful NodePrepareResources calls: count, sum (s) and cumulative buckets {le: count}."""
    calls: dict = {"count": 0.0, "sum": 0.0, "buckets": {}, "errors": 0.0}
    for suffix, labels, value in _series(lines, GRPC_METRIC):
        if labels.get("driver_name") != driver or not labels.get("method_name", "").endswith(PREPARE_METHOD):
            continue
        if labels.get("grpc_status_code") != "OK":
            calls["errors"] += value if suffix == "count" else 0.0
        elif suffix == "bucket":
            calls["buckets"][float(labels["le"])] = value
        elif suffix in ("count", "sum"):
            calls[suffix] = value
    return calls


def judge(lines: list[str], budget: Budget, load_per_cpu: float | None = None) -> tuple[str, list[str], list[dict]]:
    """(verdict, evidence, figures): pass when every call was within the budget, fail when one was not.

    The verdict is exact only at a bucket boundary (the le bucket counts the calls at or under it),
    so a budget between boundaries is inconclusive rather than rounded either way. ``load_per_cpu``
    is the host's load average per CPU over the run: the kubelet times calls by the wall clock, so on
    an oversubscribed host a call over budget is inconclusive (a pass there stays a pass).
    """
    calls = prepare_calls(lines)
    n, ms = int(calls["count"]), budget.max_seconds * 1000
    figures = [{"name": "prepare_calls", "value": n, "unit": ""},
               {"name": "prepare_budget_max", "value": budget.max_seconds, "unit": "s"}]
    if load_per_cpu is not None:
        figures.append({"name": "host_load_per_cpu", "value": round(load_per_cpu, 2), "unit": ""})
    if calls["errors"]:
        figures.append({"name": "prepare_calls_failed", "value": int(calls["errors"]), "unit": ""})
    if n:
        figures.append({"name": "prepare_mean", "value": calls["sum"] / n, "unit": "s"})
        full = [le for le, c in calls["buckets"].items() if c >= n and le != float("inf")]
        if full:
            figures.append({"name": "prepare_max_at_most", "value": min(full), "unit": "s"})
    if n < budget.min_calls:
        return "inconclusive", [f"{n} successful NodePrepareResources calls to {DRIVER_NAME} in the kubelet's "
                                f"{GRPC_METRIC}, at least {budget.min_calls} needed to judge"], figures
    at = [c for le, c in calls["buckets"].items() if abs(le - budget.max_seconds) < 1e-9]
    if not at:
        return "inconclusive", [f"the kubelet's {GRPC_METRIC} has no bucket at {ms:g} ms "
                                f"(boundaries {sorted(calls['buckets'])[:4]}...): the budget must be one"], figures
    over = n - int(at[0])
    figures.append({"name": "prepare_calls_over_budget", "value": over, "unit": ""})
    mean = f"mean {calls['sum'] / n * 1000:.1f} ms"
    if over:
        bound = [f["value"] for f in figures if f["name"] == "prepare_max_at_most"]
        slow = f"at most {bound[0] * 1000:g} ms" if bound else "beyond the histogram's largest bucket"
        said = f"{over} of {n} NodePrepareResources calls took longer than the {ms:g} ms budget"
        if load_per_cpu is not None and load_per_cpu > budget.max_load_per_cpu:
            return "inconclusive", [f"{said}, but the host ran {load_per_cpu:.1f} runnable tasks per CPU over the "
                                    f"run (5-min load average), over {budget.max_load_per_cpu:g}: the wall-clock "
                                    "times measured the host's run queue, not the driver; re-run on a quieter "
                                    f"host (the slowest {slow}; {mean})"], figures
        return "fail", [f"{over} of {n} NodePrepareResources calls took longer than the {ms:g} ms budget "
                        f"(the slowest {slow}; {mean})"], figures
    return "pass", [f"all {n} NodePrepareResources calls within the {ms:g} ms budget ({mean})"], figures


def pod_prepare_figures(lines: list[str]) -> list[dict]:
    """The mean of the kubelet's successful per-pod PrepareResources operations (every pod, claims or not).

    The kubelet 1.34 labels them is_error="true" (pkg/kubelet/cm/dra/manager.go: FormatBool(err == nil)).
    """
    values = {suffix: value for suffix, labels, value in _series(lines, POD_METRIC)
              if labels.get("operation_name") == "PrepareResources" and labels.get("is_error") == "true"
              and suffix in ("sum", "count")}
    if not values.get("count") or "sum" not in values:
        return []
    return [{"name": "prepare_resources_mean", "value": values["sum"] / values["count"], "unit": "s"},
            {"name": "prepare_resources_calls", "value": values["count"], "unit": ""}]


def host_load_per_cpu() -> float:
    """The 5-min load average per CPU: kind's nodes run on this host, so their processes waited in its run queue."""
    return os.getloadavg()[1] / (os.cpu_count() or 1)


def preparation_latency(s) -> list[Finding]:
    """Last scenario: judge every preparation of the run from the kubelet's histograms (no pods of its own).

    ``s`` is the cluster's DraCpuSession; the steady scenario left its pods' scheduled-to-ready spans
    in ``s.start_spans`` (1 s resolution of pod conditions: reported, not judged).
    """
    budget = load_budget()
    grpc = s.kubelet_metric(GRPC_METRIC)
    verdict, evidence, figures = judge(grpc, budget, host_load_per_cpu())
    pods = [line for line in s.kubelet_metric(POD_METRIC) if "PrepareResources" in line]
    figures += pod_prepare_figures(pods)
    spans = [v for v in s.start_spans.values() if v is not None]
    if spans:
        figures.append({"name": "scheduled_to_ready_max", "value": max(spans), "unit": "s"})
        evidence.append("steady pods scheduled->ready: " + ", ".join(f"{k} {v}s" for k, v in s.start_spans.items()))
    return [Finding("LAT-501", verdict, "preparation-latency", evidence, figures)]
