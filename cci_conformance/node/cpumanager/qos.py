"""The kubelet's pod QoS class and the exclusive-CPU count of a container (v1 qos rules, guaranteedCPUs)."""

from __future__ import annotations

from fractions import Fraction

from ..api import ContainerSpec, PodSpec
from .quantity import cpu_value, is_integral_cpu, parse_quantity

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"


def effective_requests(container: ContainerSpec) -> dict[str, str]:
    """Requests after API defaulting: an unset request takes the limit's value (core/v1 defaults)."""
    out: dict[str, str] = {}
    for name, request, limit in (
        ("cpu", container.cpu_request, container.cpu_limit),
        ("memory", container.memory_request, container.memory_limit),
    ):
        value = request if request is not None else limit
        if value is not None:
            out[name] = value
    return out


def _limits(container: ContainerSpec) -> dict[str, str]:
    return {n: v for n, v in (("cpu", container.cpu_limit), ("memory", container.memory_limit)) if v is not None}


def pod_qos_class(pod: PodSpec) -> str:
    """``GetPodQOS`` of pkg/apis/core/v1/helper/qos: sums over all containers, zero quantities ignored.

    Guaranteed iff every container sets positive cpu and memory limits and, summed over the pod,
    requests equal limits for both; BestEffort iff nothing is requested or limited; else Burstable.
    """
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    for container in pod.containers:
        for name, text in effective_requests(container).items():
            value = parse_quantity(text, what=f"container {container.name!r} {name} request")
            if value > 0:
                requests[name] = requests.get(name, Fraction(0)) + value
        found: set[str] = set()
        for name, text in _limits(container).items():
            value = parse_quantity(text, what=f"container {container.name!r} {name} limit")
            if value > 0:
                found.add(name)
                limits[name] = limits.get(name, Fraction(0)) + value
        if not {"cpu", "memory"} <= found:
            guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    if guaranteed:
        for name, value in requests.items():
            if limits.get(name) != value:
                guaranteed = False
                break
    if guaranteed and len(requests) == len(limits):
        return GUARANTEED
    return BURSTABLE


def exclusive_cpus(pod: PodSpec, container: ContainerSpec) -> int:
    """The kubelet's ``guaranteedCPUs``: the integer CPU request of a container of a Guaranteed pod, else 0."""
    if pod_qos_class(pod) != GUARANTEED:
        return 0
    request = effective_requests(container).get("cpu")
    if request is None:
        return 0
    if not is_integral_cpu(request):
        return 0
    return cpu_value(request)
