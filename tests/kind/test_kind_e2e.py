"""kind e2e: a real kubelet on a faked 2-socket SMT2 worker gives Guaranteed containers exclusive CPUs."""

from __future__ import annotations

import pytest
from kind_plans import INTEL, INTEL_PROFILE

from cci_conformance.cpuset import parse_cpulist
from cci_conformance.kind.cluster import pods
from cci_conformance.kind.cluster.node_access import NodeAccess
from cci_conformance.kind.differential import Step, g
from cci_conformance.topology import library
from cci_conformance.waiting import wait_for

pytestmark = pytest.mark.kind

QOS_PODS = [
    Step("e2e-guaranteed-4", g("4")),
    Step("e2e-guaranteed-2x2", g("2", "2")),
    Step("e2e-burstable", (("500m", "2"),)),
    Step("e2e-besteffort", ((None, None),)),
    Step("e2e-guaranteed-frac", g("1500m")),
]


def test_worker_sees_the_faked_topology(cluster, intel_worker):
    node = NodeAccess(intel_worker)
    topology = library.load(INTEL)
    assert parse_cpulist(node.host.file("/sys/devices/system/cpu/online").content_string) == topology.online_cpus
    capacity = cluster.kubectl("get", "node", intel_worker, "-o", "jsonpath={.status.capacity.cpu}")
    assert int(capacity) == len(topology.online_cpus)
    sockets = node.host.check_output("lscpu -p=SOCKET | grep -v '^#' | sort -u | wc -l")
    assert int(sockets) == 2


def test_guaranteed_containers_get_exclusive_cpus(cluster, intel_worker):
    node = NodeAccess(intel_worker)
    image = pods.pause_image(cluster, intel_worker)
    uids = {}
    try:
        for step in QOS_PODS:
            admitted = pods.create_and_wait(cluster, step.pod(""), intel_worker, image)
            assert admitted.phase == "Running", admitted
            uids[step.name] = admitted.uid
        # The harness's own loads() verifies the checksum and raises on any mismatch.
        state = node.cpu_manager_state()
        reserved = parse_cpulist(INTEL_PROFILE["reservedSystemCPUs"])
        assert state.policy_name == "static"
        exclusive = {}
        for name, expected in (("e2e-guaranteed-4", {"c0": 4}), ("e2e-guaranteed-2x2", {"c0": 2, "c1": 2})):
            entries = state.entries[uids[name]]
            assert {c: len(cpus) for c, cpus in entries.items()} == expected
            exclusive.update({(name, c): cpus for c, cpus in entries.items()})
        for name in ("e2e-burstable", "e2e-besteffort", "e2e-guaranteed-frac"):
            assert uids[name] not in state.entries, f"{name} must run on the shared pool"
        taken = [cpu for cpus in exclusive.values() for cpu in cpus]
        assert len(taken) == len(set(taken)), "exclusive CPUs overlap"
        assert not set(taken) & state.default_cpuset and not set(taken) & reserved
        assert set(taken) | state.default_cpuset == library.load(INTEL).online_cpus

        # The runtime was asked for exactly these sets (recorded by the node's cpuset recorder); shared
        # containers converge on the shared pool through the kubelet's reconcile loop.
        def runtime_agrees():
            by_pod = {}
            for record in node.recorded_cpusets().values():
                by_pod[(record.pod_name, record.container_name)] = record.requested
            for key, cpus in exclusive.items():
                if by_pod.get(key) != cpus:
                    return False
            return all(by_pod.get((n, "c0")) == state.default_cpuset
                       for n in ("e2e-burstable", "e2e-besteffort", "e2e-guaranteed-frac"))
        wait_for(runtime_agrees, timeout=60, interval=1, what="container cpusets to match cpu_manager_state")
    finally:
        for name in uids:
            pods.delete(cluster, name)
