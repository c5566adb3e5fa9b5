"""Kubernetes quantities, the pod QoS class and guaranteedCPUs."""

from __future__ import annotations

from fractions import Fraction

import pytest

from cci_conformance.node.api import ContainerSpec, PodSpec
from cci_conformance.node.cpumanager.qos import BEST_EFFORT, BURSTABLE, GUARANTEED, exclusive_cpus, pod_qos_class
from cci_conformance.node.cpumanager.quantity import (
    QuantityError,
    cpu_milli,
    cpu_value,
    is_integral_cpu,
    memory_bytes,
    parse_quantity,
)


@pytest.mark.parametrize(
    "text,milli",
    [("2", 2000), ("500m", 500), ("1.5", 1500), ("0.1", 100), ("1e3", 1_000_000), ("2k", 2_000_000),
     ("100u", 1), ("0", 0), (".5", 500), ("1500m", 1500)],
)
def test_cpu_milli(text, milli):
    assert cpu_milli(text) == milli


@pytest.mark.parametrize(
    "text,nbytes",
    [("1Gi", 1 << 30), ("512Mi", 512 << 20), ("1G", 10**9), ("100", 100), ("1.5Ki", 1536), ("1e2", 100), ("1k", 1000)],
)
def test_memory_bytes(text, nbytes):
    assert memory_bytes(text) == nbytes


@pytest.mark.parametrize("text,integral,value", [("2", True, 2), ("2000m", True, 2), ("1500m", False, 2),
                                                 ("0.5", False, 1), ("1.9999", True, 2), ("0", True, 0)])
def test_integral_cpu_follows_value_times_1000_equals_milli(text, integral, value):
    # "1.9999": MilliValue rounds 1999.9 up to 2000 = Value()*1000, so the kubelet calls it integral.
    assert is_integral_cpu(text) is integral
    assert cpu_value(text) == value


@pytest.mark.parametrize("bad", ["", "abc", "1.2.3", "5 m", "1Qi", " 1", "1mi", "--1", "m"])
def test_bad_quantities_say_what_is_wrong(bad):
    with pytest.raises(QuantityError, match="quantity|suffix"):
        parse_quantity(bad)


def test_negative_is_refused_for_resources():
    assert parse_quantity("-1") == Fraction(-1)
    with pytest.raises(QuantityError, match="negative"):
        cpu_milli("-500m")


def c(name="c", cpu_req=None, cpu_lim=None, mem_req=None, mem_lim=None):
    return ContainerSpec(
        name=name, cpu_request=cpu_req, cpu_limit=cpu_lim, memory_request=mem_req, memory_limit=mem_lim
    )


def pod(*containers):
    return PodSpec(namespace="ns", name="p", uid="uid-1", containers=tuple(containers))


@pytest.mark.parametrize(
    "containers,qos",
    [
        ([c()], BEST_EFFORT),
        ([c(cpu_lim="2", mem_lim="1Gi")], GUARANTEED),  # requests default to limits
        ([c(cpu_req="2", cpu_lim="2", mem_req="1Gi", mem_lim="1Gi")], GUARANTEED),
        ([c(cpu_req="1", cpu_lim="2", mem_lim="1Gi")], BURSTABLE),
        ([c(cpu_req="2")], BURSTABLE),
        ([c(cpu_lim="2")], BURSTABLE),  # no memory limit
        ([c(cpu_lim="2", mem_lim="1Gi"), c("b")], BURSTABLE),  # one container without limits
        ([c(cpu_lim="2", mem_lim="1Gi"), c("b", cpu_lim="500m", mem_lim="1G")], GUARANTEED),
        ([c(cpu_req="0", mem_req="0")], BEST_EFFORT),  # zero quantities are ignored
        ([c(cpu_lim="2000m", mem_lim="1024Mi", cpu_req="2", mem_req="1Gi")], GUARANTEED),  # compared as values
    ],
)
def test_pod_qos_class(containers, qos):
    assert pod_qos_class(pod(*containers)) == qos


def test_exclusive_cpus_only_for_integer_requests_of_guaranteed_pods():
    g = pod(c("int", cpu_lim="3", mem_lim="1Gi"), c("frac", cpu_lim="1500m", mem_lim="1Gi"))
    assert exclusive_cpus(g, g.containers[0]) == 3
    assert exclusive_cpus(g, g.containers[1]) == 0
    b = pod(c("x", cpu_req="2", cpu_lim="4", mem_lim="1Gi"))
    assert exclusive_cpus(b, b.containers[0]) == 0
    best_effort = pod(c("y"))
    assert exclusive_cpus(best_effort, best_effort.containers[0]) == 0
