"""The kind backend's parts that need no cluster: registration, refusals, pod objects, the run's cluster and driver,
the session's waits (the ledger read from files: test_kind_ledger.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_kind_ledger import created_lines

from cci_conformance.drivers.manifest import load_manifest
from cci_conformance.errors import ConfigError
from cci_conformance.kind.cci import driver_hooks, pod_objects, run_cluster
from cci_conformance.node.api import ClaimRef, ContainerSpec, PodSpec
from cci_conformance.paths import PROJECT_ROOT
from cci_conformance.topology import library


def test_kind_is_registered_without_importing_kind_code():
    # The adapter (kind/cci/backend.py) and its two docstring-only packages, nothing the sessions need.
    code = ("import sys; from cci_conformance.backends.registry import get_backend; b = get_backend('kind'); "
            "print(b.name, sorted(m for m in sys.modules if m.startswith(('cci_conformance.kind', 'testinfra', "
            "'kubernetes'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PROJECT_ROOT)
    adapter = ["cci_conformance.kind", "cci_conformance.kind.cci", "cci_conformance.kind.cci.backend"]
    assert out.stdout.strip() == f"kind {adapter}"


def test_a_driver_without_a_kind_image_is_refused_naming_the_field(tmp_path):
    from cci_conformance.kind.cci import driver_image

    minimal = load_manifest(PROJECT_ROOT / "drivers_under_test" / "examples" / "minimal")
    if minimal.command[0] == "{python}":  # the example is a Python driver: give it another interpreter
        (tmp_path / "driver.yaml").write_text("name: native\nprotocol: cci/v1alpha1\ncapabilities: []\n"
                                              "local:\n  command: [./native]\n")
        minimal = load_manifest(tmp_path)
    with pytest.raises(ConfigError) as err:
        driver_image.for_manifest(minimal)
    assert err.value.field == "kind.image" and minimal.name in str(err.value)


def test_a_vendor_image_archive_names_its_image_and_needs_its_command(tmp_path):
    import io
    import json
    import tarfile

    from cci_conformance.kind.cci import driver_image

    archive = tmp_path / "driver.tar"
    with tarfile.open(archive, "w") as tar:
        data = json.dumps([{"RepoTags": ["example.com/driver:1.2"], "Layers": []}]).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    base = "name: vendor\nprotocol: cci/v1alpha1\ncapabilities: []\nlocal:\n  command: [./d]\n"
    (tmp_path / "driver.yaml").write_text(base + "kind:\n  image: driver.tar\n")
    with pytest.raises(ConfigError) as err:
        driver_image.for_manifest(load_manifest(tmp_path))
    assert err.value.field == "kind.command"
    command = "  command: [/d, '--state-dir={state_dir}']\n"
    (tmp_path / "driver.yaml").write_text(base + "kind:\n  image: driver.tar\n" + command)
    image = driver_image.for_manifest(load_manifest(tmp_path))
    assert (image.reference, image.origin, image.command) == ("example.com/driver:1.2", "vendor archive",
                                                              ("/d", "--state-dir={state_dir}"))
    assert image.digest.startswith("sha256:") and len(image.digest) == 71
    (tmp_path / "driver.yaml").write_text(base + "kind:\n  image: missing.tar\n  command: [/d]\n")
    with pytest.raises(ConfigError, match="does not exist"):
        driver_image.for_manifest(load_manifest(tmp_path))


def test_a_claim_pod_goes_through_the_scheduler_with_its_parameters_as_opaque_config():
    params = {"cores": ["2"], "cpu attributes": [["EXCLUSIVE"]]}
    pod = PodSpec("conformance", "name-cci-1", "cci-1", (ContainerSpec("c0", claim="claim"),),
                  (ClaimRef("claim", "claim-cci-1", params),))
    obj = pod_objects.pod_object(pod, "name-cci-1", "w", "pause:1")
    assert obj["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "w"} and "nodeName" not in obj["spec"]
    assert obj["spec"]["resourceClaims"] == [{"name": "claim", "resourceClaimName": "name-cci-1-claim"}]
    assert obj["spec"]["containers"][0]["resources"] == {"claims": [{"name": "claim"}]}
    assert obj["metadata"]["annotations"][pod_objects.TEST_UID] == "cci-1"
    assert obj["spec"]["hostNetwork"] is True  # no CNI plugin or IP range between admission and the sandbox
    (claim,) = pod_objects.claim_objects(pod, "name-cci-1", "go-reference")
    assert claim["spec"]["devices"]["config"][0]["opaque"] == {"driver": "go-reference", "parameters": params}
    assert claim["metadata"]["labels"] == {pod_objects.LABEL: "name-cci-1"}
    static = PodSpec("conformance", "s", "s", (ContainerSpec("c0", "2", "2", "1Gi", "1Gi"),))
    obj = pod_objects.pod_object(static, "s", "w", "pause:1")
    assert obj["spec"]["nodeName"] == "w"
    assert obj["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "2", "memory": "1Gi"},
                                                          "limits": {"cpu": "2", "memory": "1Gi"}}


def test_the_driver_sees_the_faked_pci_devices(tmp_path):
    from cci_conformance.kind.cci import run_driver
    from cci_conformance.kind.cci.manifests import CCIDriverDeployment
    from cci_conformance.topology import render

    machine = render.render(library.load("server-2s8c-smt2-intel"), tmp_path / "m")
    data, roots = run_driver.pci_tar(machine)
    assert roots[0] == "bus" and "devices/pci0000:ca" in roots and "devices/system" not in roots
    plan = CCIDriverDeployment(load_manifest(PROJECT_ROOT / "drivers_under_test" / "go-reference"), "img:1", "w",
                               "go-reference")
    pod = run_driver.daemonset(plan, roots)["spec"]["template"]["spec"]
    mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["/host/sys/bus"]["readOnly"] and "/host/sys/devices/pci0000:ca" in mounts
    paths = {v["hostPath"]["path"] for v in pod["volumes"]}
    assert f"{run_driver.PCI_COPY}/sys/devices/pci0000:ca" in paths


def test_a_run_makes_one_cluster_and_an_xdist_worker_only_its_machines_groups(monkeypatch):
    laptop, server, hybrid = (library.load(n) for n in ("laptop-1s4c-smt2", "server-2s8c-smt2-intel", "hybrid-8p8e"))
    monkeypatch.setattr(run_cluster.RunCluster, "_clusters", [])
    run_cluster.RunCluster.plan([(server, laptop), (laptop, hybrid)])  # each run machine, then LAT-004's beside it

    def names(machines):
        return [t.name for t in machines]
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert names(run_cluster.RunCluster._machines_for(laptop)) == [laptop.name, server.name, hybrid.name]
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")  # a worker of `run -n`: the groups its machine leads
    assert names(run_cluster.RunCluster._machines_for(laptop)) == [laptop.name, hybrid.name]
    assert names(run_cluster.RunCluster._machines_for(server)) == [server.name, laptop.name]
    assert names(run_cluster.RunCluster._machines_for(hybrid)) == [hybrid.name]  # only ever opened beside laptop


class _DriverPodsAPI:
    """The API server as _replace_driver_pod sees it: pods listed by label, deleted, then gone."""

    def __init__(self, pods):
        self.pods = {p["metadata"]["name"]: p for p in pods}
        self.deleted: list[tuple[str, int | None]] = []

    def list_pods(self, label_selector="", field_selector=""):
        assert label_selector == "cci-driver=drv,cci-node=w1"
        return list(self.pods.values())

    def get_pod(self, namespace, name):
        return self.pods.get(name)

    def delete_pod(self, namespace, name, grace_seconds=None):
        self.deleted.append((name, grace_seconds))
        self.pods.pop(name)


def _driver_pod(name, namespace="kube-system", phase="Running", deleting=False):
    meta = {"name": name, "namespace": namespace, "uid": "uid-" + name}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-02T08:00:00Z"
    return {"metadata": meta, "status": {"phase": phase}}


def test_the_driver_pod_is_the_running_one_and_a_hard_replace_deletes_it_without_grace(monkeypatch):
    from types import SimpleNamespace

    from cci_conformance.kind.cci import session as kind_session

    session = kind_session.KindSession.__new__(kind_session.KindSession)
    session.plan = SimpleNamespace(driver_name="drv", node_name="w1")
    session.node = "w1"
    session.api = _DriverPodsAPI([_driver_pod("old", deleting=True), _driver_pod("other", namespace="default"),
                                  _driver_pod("pending", phase="Pending"), _driver_pod("live")])
    assert session._driver_pod()["metadata"]["name"] == "live"
    sent = []
    monkeypatch.setattr(driver_hooks, "node_exec", lambda node, script, timeout=30: sent.append(script) or "")
    monkeypatch.setattr(session, "_driver_pid", lambda: 4242)
    monkeypatch.setattr(session, "_read", lambda: SimpleNamespace(kubelet_pid=7))
    session._replace_driver_pod(hard=True)
    assert session.api.deleted == [("live", 0)]  # no grace period: SIGTERM never reaches the stopped process
    assert sent[0].startswith("kill -STOP 4242") and "crictl ps -q --label io.kubernetes.pod.uid=uid-live" in sent[1]


def test_a_driver_pod_the_daemonset_is_already_deleting_is_still_stopped_and_awaited(monkeypatch):
    """Once the DaemonSet selects no node its controller deletes the driver pod gracefully; a stop must still find
    that pod, stop it (hard) and wait for its processes, or the driver answers one more admission (ROBUST-004 on
    kind)."""
    from types import SimpleNamespace

    from cci_conformance.kind.cci import session as kind_session

    session = kind_session.KindSession.__new__(kind_session.KindSession)
    session.plan = SimpleNamespace(driver_name="drv", node_name="w1")
    session.node = "w1"
    session.api = _DriverPodsAPI([_driver_pod("going", deleting=True)])
    assert session._driver_pod() is None  # not the driver a new session or a restart waits for
    sent = []
    monkeypatch.setattr(driver_hooks, "node_exec", lambda node, script, timeout=30: sent.append(script) or "")
    monkeypatch.setattr(session, "_driver_pid", lambda: 4242)
    monkeypatch.setattr(session, "_read", lambda: SimpleNamespace(kubelet_pid=7))
    monkeypatch.setattr(session, "_select_worker", lambda on: None)
    session.stop_driver(hard=True)
    assert sent[0].startswith("kill -STOP 4242") and session.api.deleted == [("going", 0)]
    assert "crictl ps -q --label io.kubernetes.pod.uid=uid-going" in sent[1]


@pytest.mark.parametrize(("status", "stalled"), [
    # admitted and synced by the kubelet, the runtime still creating the sandbox: the node's fault
    ({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"},
                                         {"type": "PodReadyToStartContainers", "status": "False"}]}, True),
    # the kubelet has not admitted it yet (a CCI Admit may be pending): not the node's alone
    ({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}, False),
    # the sandbox runs, a container does not (CCIAddContainerResource is on that path): not the node's alone
    ({"phase": "Pending", "conditions": [{"type": "PodReadyToStartContainers", "status": "True"}]}, False),
    ({"phase": "Failed", "conditions": [{"type": "PodReadyToStartContainers", "status": "False"}]}, False),
])
def test_only_an_admitted_pod_without_a_sandbox_is_the_runtimes_stall(status, stalled):
    assert pod_objects.sandbox_stalled({"status": status}) is stalled
    assert pod_objects.sandbox_stalled(None) is False


class _StalledPodAPI:
    def __init__(self, conditions):
        self.conditions = conditions

    def create(self, obj):
        return obj

    def get_pod(self, namespace, name):
        return {"metadata": {"name": name, "uid": "u"}, "spec": {"containers": [{"name": "c0"}]},
                "status": {"phase": "Pending", "conditions": self.conditions}}

    def pod_events(self, namespace, name):
        return [{"reason": "FailedCreatePodSandBox", "message": "failed to setup network for sandbox"}]


@pytest.mark.parametrize("sandbox", ["False", "True"])
def test_a_pod_whose_sandbox_never_starts_is_a_node_fault_and_a_stuck_container_is_not(monkeypatch, sandbox):
    from types import SimpleNamespace

    from cci_conformance.backends.base import NodeFault
    from cci_conformance.kind.cci import session as kind_session
    from cci_conformance.waiting import WaitTimeout

    monkeypatch.setattr(kind_session, "POD_TIMEOUT_S", 0.3)
    session = kind_session.KindSession.__new__(kind_session.KindSession)
    session.driver, session.node, session._image = "drv", "w1", "pause:1"
    session.api = _StalledPodAPI([{"type": "PodReadyToStartContainers", "status": sandbox}])
    monkeypatch.setattr(session, "_namespace", lambda name: None)
    session._call_log = SimpleNamespace(seconds=lambda uid: (0.001, 0.001))
    pod = PodSpec("conformance", "p", "p-1", (ContainerSpec("c0", claim="claim"),),
                  (ClaimRef("claim", "claim-1", {"cores": ["1"]}),))
    expected = NodeFault if sandbox == "False" else WaitTimeout
    with pytest.raises(expected) as err:
        session.create_pod(pod)
    if sandbox == "False":
        assert "had not started its sandbox" in str(err.value) and "FailedCreatePodSandBox" in str(err.value)


def test_a_restarted_kubelet_is_waited_for_until_it_lists_the_running_pods(monkeypatch):
    from types import SimpleNamespace

    from cci_conformance.backends.base import NodeFault
    from cci_conformance.kind.cci import kubelet_restarts
    from cci_conformance.kind.cci import session as kind_session

    session = kind_session.KindSession.__new__(kind_session.KindSession)
    session.node = "w1"
    ours = [{"metadata": {"namespace": "conformance", "name": "a"}, "status": {"phase": "Running"}},
            {"metadata": {"namespace": "conformance", "name": "b"}, "status": {"phase": "Pending"}}]
    monkeypatch.setattr(session, "_ours", lambda: ours)
    replies = [[], [], [("conformance", "a")]]  # the kubelet learns its pods a moment after /healthz (r7)

    def listed(method):
        pods = replies.pop(0) if len(replies) > 1 else replies[0]
        return SimpleNamespace(pod_resources=[SimpleNamespace(namespace=n, name=p) for n, p in pods])
    monkeypatch.setattr(session, "_pod_resources", listed)
    session._wait_pods_known()
    assert replies == [[("conformance", "a")]]  # it asked until the running pod was listed
    monkeypatch.setattr(kubelet_restarts, "KUBELET_TIMEOUT_S", 0.5)
    monkeypatch.setattr(session, "_pod_resources", lambda method: SimpleNamespace(pod_resources=[]))
    with pytest.raises(NodeFault, match="still misses pods"):
        session._wait_pods_known()


class _ClusterThatWillNotStart:
    deleted = False

    def __init__(self, plan, kind, kubectl):
        self.plan = plan
        self.created = False

    def create(self):
        from cci_conformance.kind.runner import CommandFailed
        self.created = True
        raise CommandFailed("kind create cluster: exit 1 (docker: no space left on device)")

    def delete(self):
        type(self).deleted = True


def test_a_cluster_that_cannot_start_is_a_node_fault_and_is_deleted(monkeypatch):
    from cci_conformance.backends.base import NodeFault
    from cci_conformance.drivers.manifest import load_manifest
    from cci_conformance.kind.cluster import toolchain
    from cci_conformance.kind.image import nodeimage
    from cci_conformance.node.profile import load_config
    from cci_conformance.paths import PROJECT_ROOT, REFERENCE_DRIVER_DIR

    monkeypatch.setattr(nodeimage, "image_exists", lambda image: True)
    monkeypatch.setattr(nodeimage, "image_facts", lambda image: {})
    monkeypatch.setattr(nodeimage, "stale_patch", lambda facts: "")
    monkeypatch.setattr(toolchain, "docker_problem", lambda: None)
    monkeypatch.setattr(toolchain, "kind_binary", lambda: "kind")
    monkeypatch.setattr(toolchain, "kubectl_binary", lambda: "kubectl")
    monkeypatch.setattr(run_cluster, "inotify_problem", lambda n: None)
    monkeypatch.setattr(run_cluster, "delete_orphans", lambda kind: [])
    monkeypatch.setattr(run_cluster, "KindCluster", _ClusterThatWillNotStart)
    monkeypatch.setattr(run_cluster.atexit, "register", lambda fn: None)
    monkeypatch.setattr(run_cluster.RunCluster, "_clusters", [])
    config = load_config(PROJECT_ROOT / "profiles" / "node" / "coexistence.yaml", need_paths=False)
    with pytest.raises(NodeFault, match="did not start: kind create cluster"):
        run_cluster.RunCluster(None, config, load_manifest(REFERENCE_DRIVER_DIR), (library.load("laptop-1s4c-smt2"),))
    assert _ClusterThatWillNotStart.deleted  # nothing is left behind


class _ClusterThatStarts(_ClusterThatWillNotStart):
    def create(self):
        self.created = True

    def wait_ready(self):
        pass

    kubeconfig = "kubeconfig"
    workdir = PROJECT_ROOT  # never read: the deployment below fails first


@pytest.fixture
def unstartable_run(monkeypatch):
    """RunCluster with every outside step faked; the test picks the cluster class and what deploying does."""
    from types import SimpleNamespace

    from cci_conformance.kind.cci import run_driver
    from cci_conformance.kind.cluster import toolchain
    from cci_conformance.kind.image import nodeimage

    monkeypatch.setattr(nodeimage, "image_exists", lambda image: True)
    monkeypatch.setattr(nodeimage, "image_facts", lambda image: {})
    monkeypatch.setattr(nodeimage, "stale_patch", lambda facts: "")
    monkeypatch.setattr(toolchain, "docker_problem", lambda: None)
    monkeypatch.setattr(toolchain, "kind_binary", lambda: "kind")
    monkeypatch.setattr(toolchain, "kubectl_binary", lambda: "kubectl")
    monkeypatch.setattr(run_cluster, "inotify_problem", lambda n: None)
    monkeypatch.setattr(run_cluster, "delete_orphans", lambda kind: [])
    monkeypatch.setattr(run_cluster, "KubeAPI", lambda kubeconfig: SimpleNamespace(close=lambda: None))
    monkeypatch.setattr(run_cluster.driver_image, "for_manifest", lambda manifest: SimpleNamespace(
        reference="driver:1", command=["driver"], python=False, working_dir="/", env={}, archive=None))
    monkeypatch.setattr(run_cluster.atexit, "register", lambda fn: None)
    monkeypatch.setattr(run_cluster.RunCluster, "_clusters", [])
    monkeypatch.setattr(run_cluster.RunCluster, "_failed", {})
    monkeypatch.setattr(run_cluster.RunCluster, "_groups", ())
    return SimpleNamespace(monkeypatch=monkeypatch, run_driver=run_driver)


@pytest.mark.parametrize("what", ["cluster", "driver"])
def test_a_run_cluster_that_cannot_start_stops_the_run_and_is_tried_once(unstartable_run, what):
    import yaml

    from cci_conformance.backends.base import NodeFault, NodeStartFailed
    from cci_conformance.paths import REFERENCE_DRIVER_DIR
    from cci_conformance.waiting import WaitTimeout

    made = []

    class Cluster(_ClusterThatWillNotStart if what == "cluster" else _ClusterThatStarts):
        deleted = False

        def __init__(self, plan, kind, kubectl):
            super().__init__(plan, kind, kubectl)
            made.append(plan.name)

    def never_registers(*args, **kwargs):
        raise WaitTimeout("timed out after 120.0s waiting for the kubelet to answer CCI driver reference's "
                          "registration")

    unstartable_run.monkeypatch.setattr(run_cluster, "KindCluster", Cluster)
    unstartable_run.monkeypatch.setattr(unstartable_run.run_driver, "deploy", never_registers)
    profile = yaml.safe_load((PROJECT_ROOT / "profiles" / "node" / "coexistence.yaml").read_text())
    manifest, topology = load_manifest(REFERENCE_DRIVER_DIR), library.load("laptop-1s4c-smt2")
    with pytest.raises(NodeStartFailed) as first:
        run_cluster.RunCluster.for_session(topology, profile, manifest)
    # the run stops on it (certify/early_stop.py); REG-001 is the driver's only when the driver did not register
    assert first.value.driver_at_fault is (what == "driver")
    if what == "driver":
        assert "did not register with the kubelet of machine laptop-1s4c-smt2" in str(first.value)
        assert str(manifest.path) in str(first.value) and isinstance(first.value.__cause__, WaitTimeout)
    else:
        assert "did not come up" in str(first.value) and isinstance(first.value.__cause__, NodeFault)
    with pytest.raises(NodeStartFailed) as second:  # the worker's later sessions: at once, no second cluster
        run_cluster.RunCluster.for_session(topology, profile, manifest)
    assert second.value is first.value and len(made) == 1 and Cluster.deleted


class _SerialKubelet:
    """Admits the pods created on it one at a time, each at the next checkpoint read, and records each pod's calls
    (CCIAdmit, Add, the whole admission) in its per-call record; ``events`` records creations and admissions."""

    def __init__(self, seconds: dict[str, float], record: Path):
        self.seconds, self.events, self.record = seconds, [], record
        self.created: list[str] = []
        self.admitted: list[str] = []

    def create(self, obj):
        if obj["kind"] == "Pod":
            self.created.append(obj["metadata"]["name"])
            self.events.append(("create", obj["metadata"]["name"]))
        return obj

    def ledger(self):
        waiting = [n for n in self.created if n not in self.admitted]
        if waiting:
            pod, took = waiting[0], self.seconds[waiting[0]]
            self.admitted.append(pod)
            self.events.append(("admitted", pod))
            with self.record.open("a") as f:
                for call, seconds in (("CCIAdmit", took / 2), ("admission", took), ("CCIAddContainerResource",
                                                                                     took / 2)):
                    f.write(json.dumps({"call": call, "pod": pod, "container": "c0", "seconds": seconds,
                                        "outcome": "admitted"}) + "\n")
        from types import SimpleNamespace
        # the runtime starts an admitted pod's container at once; the API server says so later (get_pod: never)
        return SimpleNamespace(cci={"containers": [{"podUID": n, "container": "c0", "containerID": f"id-{n}"}
                                                   for n in self.admitted]},
                               recorder="".join(created_lines(f"id-{n}", n, "c0", "1") for n in self.admitted))

    def get_pod(self, namespace, name):
        return {"metadata": {"name": name, "uid": name}, "spec": {"containers": [{"name": "c0"}]},
                "status": {"phase": "Pending", "containerStatuses": []}}


def test_pods_are_created_ahead_of_the_kubelet_up_to_the_limit_and_each_is_timed_by_its_own_calls(monkeypatch,
                                                                                                    tmp_path):
    """create_pods(overlap=True) keeps at most IN_FLIGHT pods waiting for the kubelet's admission, and each pod's
    figures are its own calls from the kubelet's per-call record, whichever pods were admitted meanwhile; without
    overlap each pod is created once the one before was admitted."""
    from cci_conformance.kind.cci import session as kind_session
    from cci_conformance.kind.cci.call_log import CALL_LOG, CallLog

    record = tmp_path / CALL_LOG.lstrip("/")
    record.parent.mkdir(parents=True)
    kubelet = _SerialKubelet({**{f"p-{i}": 0.002 * (i + 1) for i in range(5)},
                              **{f"q-{i}": 0.001 for i in range(3)}}, record)
    session = kind_session.KindSession.__new__(kind_session.KindSession)
    session.driver, session.node, session._image = "drv", "w1", "pause:1"
    session._pods, session._alias, session._call_log = {}, {}, CallLog(tmp_path)
    session.api = kubelet
    monkeypatch.setattr(kind_session, "IN_FLIGHT", 2)
    monkeypatch.setattr(session, "_namespace", lambda name: None)
    monkeypatch.setattr(session, "_ledger", kubelet.ledger)
    monkeypatch.setattr(kind_session, "assignments", lambda status, read: ())
    pods = [PodSpec("conformance", f"p-{i}", f"p-{i}", (ContainerSpec("c0", claim="claim"),),
                    (ClaimRef("claim", f"claim-{i}", {"cores": ["1"]}),)) for i in range(5)]
    results = session.create_pods(pods, settle=False, overlap=True)
    waiting = 0
    for event, _ in kubelet.events:  # never more than two created and not yet admitted
        waiting += 1 if event == "create" else -1
        assert waiting <= 2, kubelet.events
    assert kubelet.events[:3] == [("create", "p-0"), ("create", "p-1"), ("admitted", "p-0")]
    assert [r.admitted for r in results] == [True] * 5
    assert [round(r.driver_seconds, 6) for r in results] == [0.002, 0.004, 0.006, 0.008, 0.010]
    assert [round(r.node_seconds, 6) for r in results] == [0.003, 0.006, 0.009, 0.012, 0.015]
    kubelet.events.clear()
    session.create_pods([PodSpec("conformance", f"q-{i}", f"q-{i}", (ContainerSpec("c0", claim="claim"),),
                                 (ClaimRef("claim", f"qc-{i}", {"cores": ["1"]}),)) for i in range(3)], settle=False)
    assert kubelet.events == [("create", "q-0"), ("admitted", "q-0"), ("create", "q-1"), ("admitted", "q-1"),
                              ("create", "q-2"), ("admitted", "q-2")]
