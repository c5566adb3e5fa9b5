"""The kind DRA session's own logic, with kubectl and docker replaced by recorders."""

from __future__ import annotations

from types import SimpleNamespace

from cci_conformance.dra.kind_session import KindDraSession


class _Recorder:
    def __init__(self):
        self.calls: list[tuple] = []

    def kubectl(self, *args, **kwargs):
        self.calls.append(("kubectl", *args))
        return "{}"

    def delete(self, kind, *names, timeout=120, wait=True):
        self.calls.append(("delete" if wait else "delete, no wait", kind, *names))

    def find(self, kind, name, namespace="default"):
        return None

    def node_exec(self, *argv, timeout=60):
        self.calls.append(("exec", *argv))
        return "41"


def test_a_pod_deleted_while_the_kubelet_is_down_is_not_waited_for_until_it_is_back(monkeypatch):
    # a deletion is confirmed by the kubelet: waiting for it with the kubelet stopped would only time out
    rec = _Recorder()
    worker = SimpleNamespace(node="w1", **{n: getattr(rec, n) for n in ("delete", "find", "node_exec")})
    session = KindDraSession(rec, worker,
                             SimpleNamespace(topology=None, profile=None, device_mode="individual"), "dra.cpu")
    session.cluster = rec
    monkeypatch.setattr(session, "_wait_kubelet", lambda old: rec.calls.append(("kubelet back", old)))
    session.stop_kubelet()
    session.delete_pod("gone")
    assert ("delete, no wait", "pod", "gone") in rec.calls
    assert not [c for c in rec.calls if c[0] == "delete"]
    session.start_kubelet()
    back = rec.calls.index(("kubelet back", "41"))
    assert rec.calls.index(("delete", "pod", "gone")) > back
    session.delete_pod("later")  # the kubelet is up: an ordinary, waited deletion
    assert rec.calls[-2] == ("delete", "pod", "later")


class _Planned(Exception):
    """Raised in place of `kind create cluster`: the test reads the plan, no docker is touched."""


def _plan_of(monkeypatch, tmp_path, profile):
    from pathlib import Path

    from cci_conformance.certify.settings import load_topology
    from cci_conformance.dra import api
    from cci_conformance.dra import kind_session as ks
    from cci_conformance.kind.cluster import config as cluster_config
    from cci_conformance.kind.cluster import lifecycle
    from cci_conformance.paths import PROJECT_ROOT

    seen = {}
    # the cluster's scratch dir under the test's own dir: delete() is faked below, so it would stay in /tmp
    monkeypatch.setattr(lifecycle, "SCRATCH_ROOT", tmp_path)

    def create(cluster, timeout=0):
        seen["config"] = cluster_config.kind_config(cluster.plan, tmp_path / "kind")
        raise _Planned

    monkeypatch.setattr(ks.driver_image, "build", lambda manifest: SimpleNamespace(
        reference="dra:x", archive=None, program="/dracpu", driver_name=manifest.dra_driver, args=()))
    monkeypatch.setattr(ks.nodeimage, "image_exists", lambda image: True)
    monkeypatch.setattr(ks.toolchain, "kind_binary", lambda release: Path("kind"))
    monkeypatch.setattr(ks.toolchain, "kubectl_binary", lambda release: Path("kubectl"))
    monkeypatch.setattr(ks.KindCluster, "create", create)
    monkeypatch.setattr(ks.KindCluster, "delete", lambda cluster: seen.setdefault("deleted", True))
    config = api.DraSessionConfig(load_topology("server-2s8c-smt2-intel"), profile,
                                  PROJECT_ROOT / "drivers_under_test" / "dra-driver-cpu" / "driver.yaml", "v1.37.2",
                                  tmp_path / "work")
    try:
        ks.KindDraSession.open(config)
    except _Planned:
        pass
    assert seen.get("deleted"), "a cluster that failed to come up must be deleted"
    return seen["config"]


def test_the_kind_plan_is_the_vanilla_release_with_the_machine_shown_to_the_driver_only(monkeypatch, tmp_path):
    from cci_conformance.dra import api

    config = _plan_of(monkeypatch, tmp_path, api.POLICY_NONE)
    worker = config["nodes"][1]
    assert {n["image"] for n in config["nodes"]} == {"cci-conformance/kind-node:v1.37.2"}
    # policy none: the kubelet writes every CPU it sees into kubepods' cpuset, so it must see the real host
    assert all(m["containerPath"].startswith("/var/lib/cci-machine/") for m in worker["extraMounts"])
    assert "kubeadmConfigPatches" not in worker
    assert "failCgroupV1: false" in config["kubeadmConfigPatches"][0]  # 1.35+ refuses cgroup v1 hosts otherwise


def test_the_static_profile_reserves_its_cpus_on_the_workers_kubelet_with_the_v1beta4_api(monkeypatch, tmp_path):
    from cci_conformance.dra import api

    config = _plan_of(monkeypatch, tmp_path, api.static_reserved(frozenset({0, 16})))
    worker = config["nodes"][1]
    (patch,) = worker["kubeadmConfigPatches"]
    assert "kubeadm.k8s.io/v1beta4" in patch  # kubeadm 1.37 reads no v1beta3
    assert "value: static" in patch and "value: 0,16" in patch
    assert {m["containerPath"] for m in worker["extraMounts"]} >= {"/sys/devices/system/cpu", "/proc/cpuinfo"}


def test_the_restarted_kubelet_is_healthy_when_the_api_servers_node_proxy_says_so():
    # the vanilla node image has no curl: the kubelet's /healthz is asked through the API server (port 10250),
    # by the API client where the worker has one (kind), else by kubectl (an existing cluster's namespaced view)
    from cci_conformance.dra.deployment import DriverDeployment
    from cci_conformance.dra.worker import Worker

    asked = []

    def kubectl(*args, **kwargs):
        asked.append(("kubectl", *args))
        return "ok"
    api = SimpleNamespace(node_proxy=lambda node, path, timeout: asked.append(("api", node, path)) or "ok")
    for client, expected in ((None, ("kubectl", "get", "--raw", "/api/v1/nodes/w1/proxy/healthz")),
                             (api, ("api", "w1", "healthz"))):
        pids = iter(["41", "57"])
        worker = Worker(SimpleNamespace(kubectl=kubectl), "w1", DriverDeployment("img:1", "w1"), api=client)
        worker.node_exec = lambda *a, pids=pids, **k: next(pids)
        worker.wait_slices = lambda: None
        session = KindDraSession(worker.cluster, worker,
                                 SimpleNamespace(topology=None, profile=None, device_mode="individual"), "dra.cpu")
        asked.clear()
        session._wait_kubelet("41")
        assert asked == [expected]


def test_a_pod_is_stopped_by_the_kubelet_before_the_api_server_forgets_it():
    """Grace 0 removes the pod object at once: its claim was reallocated while its container still ran there."""
    from cci_conformance.dra.api import PodSpec
    from cci_conformance.dra.objects import pod_objects

    pod = next(o for o in pod_objects(PodSpec.claimed("p", 2), "w", "pause:1", "dra.example") if o["kind"] == "Pod")
    assert pod["spec"]["terminationGracePeriodSeconds"] >= 1


def test_unqualified_attribute_names_are_in_the_drivers_domain():
    # our reference publishes `cpuID`, dra-driver-cpu `dra.cpu/cpuID`: the scheduler reads both as <driver>/cpuID,
    # and so must the session, or every claim's CPUs read as none
    from cci_conformance.dra.kind_session import qualified

    published = {"cpu-0": {"cpuID": 0, "numaNodeID": 0, "socketID": 0, "coreID": 0,
                           "resource.kubernetes.io/numaNode": 0},
                 "cpu-4": {"drv.example/cpuID": 4, "drv.example/numaNodeID": 0, "drv.example/socketID": 0,
                           "drv.example/coreID": 0}}
    assert qualified(published["cpu-0"], "drv.example") == {
        "drv.example/cpuID": 0, "drv.example/numaNodeID": 0, "drv.example/socketID": 0, "drv.example/coreID": 0,
        "resource.kubernetes.io/numaNode": 0}
    session = KindDraSession(None, SimpleNamespace(node="w1", published_with_capacity=lambda key: (published, {})),
                             SimpleNamespace(topology=None, profile=None, device_mode="individual"), "drv.example")
    assert [(d.name, d.cpu, d.numa_node, d.socket, d.core) for d in session.slices()] == [
        ("cpu-0", 0, 0, 0, 0), ("cpu-4", 4, 0, 0, 0)]


def test_a_claim_whose_devices_name_no_cpu_fails_instead_of_reading_as_no_cpus():
    # an empty set made "disjoint" and "whole cores" hold for nothing: CLAIM-602 and CLAIM-603 passed on kind
    # while the session could not read a single CPU of the reference driver's claims
    import pytest

    from cci_conformance.dra.api import Allocation, PodState
    from cci_conformance.dra.checks import claim_cpus

    pod = PodState("p", "uid", "Running", (), ("p-c0",))
    unread = SimpleNamespace(allocation=lambda c: Allocation(c, True, ("cpu-0", "cpu-4"), frozenset()))
    with pytest.raises(AssertionError, match="cpu-0, cpu-4.*must carry its CPU id"):
        claim_cpus(unread, pod)
    unallocated = SimpleNamespace(allocation=lambda c: Allocation(c, False))
    with pytest.raises(AssertionError, match="no allocation"):
        claim_cpus(unallocated, pod)
    read = SimpleNamespace(allocation=lambda c: Allocation(c, True, ("cpu-0", "cpu-4"), frozenset({0, 4})))
    assert claim_cpus(read, pod) == {0, 4}
