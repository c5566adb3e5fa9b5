"""--driver-daemonset: the driver a cluster runs already is found, checked and only observed; a deploy never takes
the cluster's own objects over."""

from __future__ import annotations

import json
import subprocess

import pytest

from cci_conformance.cluster import kube, observed
from cci_conformance.cluster.kube import RUN_LABEL, Kube
from cci_conformance.cluster.worker import ClusterWorker
from cci_conformance.dra.api import FEATURES
from cci_conformance.dra.deployment import DriverDeployment
from cci_conformance.errors import ConfigError
from cci_conformance.kind.runner import CommandFailed

DS_UID = "u-ds-1"


def _daemonset(args=("--cpu-device-mode=grouped",)):
    return {"kind": "DaemonSet", "metadata": {"name": "cpu", "namespace": "vendor", "uid": DS_UID},
            "spec": {"template": {"spec": {"containers": [{"image": "vendor/cpu:1.2", "args": list(args)}]}}}}


def _pod(node, owner=DS_UID, terminating=False, name=None):
    meta = {"name": name or f"cpu-{node}", "ownerReferences": [{"kind": "DaemonSet", "uid": owner}]}
    if terminating:
        meta["deletionTimestamp"] = "2026-12-06T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node},
            "status": {"containerStatuses": [{"imageID": "docker.io/vendor/cpu@sha256:ab"}]}}


def _answering(monkeypatch, objects: dict[tuple[str, ...], dict], sent: list | None = None):
    """kubectl answered from ``objects`` keyed by the arguments after `get`; anything else not found."""
    def answer(argv, timeout, stdin=None):
        args = tuple(str(a) for a in argv[3:])
        if sent is not None:
            sent.append(args)
        if args[0] == "get":
            key = tuple(a for a in args[1:] if a not in ("-o", "json"))
            if key in objects:
                return json.dumps(objects[key])
            raise CommandFailed(subprocess.CalledProcessError(1, list(argv), b"", b"NotFound"))
        return ""
    monkeypatch.setattr(kube, "run", answer)


@pytest.mark.parametrize("bad", ["cpu", "vendor/cpu/x", "Vendor/cpu", "/cpu", "vendor/"])
def test_a_daemonset_that_is_not_namespace_slash_name_is_refused_naming_the_option(bad):
    with pytest.raises(ConfigError) as caught:
        observed.parse_ref(bad)
    assert "--driver-daemonset" in str(caught.value) and "NAMESPACE/NAME" in str(caught.value)


def test_the_device_mode_and_image_are_read_off_the_containers_flags_in_either_spelling():
    assert observed.image_of(_daemonset()) == "vendor/cpu:1.2"
    assert observed.device_mode_of(_daemonset()) == "grouped"
    assert observed.device_mode_of(_daemonset(("--cpu-device-mode", "individual"))) == "individual"
    assert observed.device_mode_of(_daemonset(("--v=4",))) is None


def test_only_a_live_pod_owned_by_that_daemonset_on_that_node_is_the_driver():
    ds = _daemonset()
    pods = [_pod("w1", owner="other"), _pod("w1", terminating=True, name="old"), _pod("w2"), _pod("w1")]
    assert observed.node_pod(pods, ds, "w1")["metadata"]["name"] == "cpu-w1"
    assert observed.node_pod(pods[:3], ds, "w1") is None


def test_the_check_refuses_a_missing_daemonset_a_node_it_skips_and_another_device_mode(monkeypatch, tmp_path):
    ref = observed.DaemonSetRef("vendor", "cpu")
    pods = {"items": [_pod("w1")]}
    _answering(monkeypatch, {("daemonset", "cpu", "-n", "vendor"): _daemonset(), ("pods", "-n", "vendor"): pods})
    k = Kube(tmp_path / "kc")
    assert observed.check(k, ref, ["w1"], "grouped")["metadata"]["uid"] == DS_UID
    with pytest.raises(ConfigError, match="runs no pod on node w2"):
        observed.check(k, ref, ["w1", "w2"], "grouped")
    with pytest.raises(ConfigError, match="--cpu-device-mode=grouped") as caught:
        observed.check(k, ref, ["w1"], None)
    assert "--device-mode grouped" in str(caught.value)
    with pytest.raises(ConfigError, match="no DaemonSet vendor/other"):
        observed.check(k, observed.DaemonSetRef("vendor", "other"), ["w1"], None)


def test_an_observed_driver_is_never_restarted_or_stopped_and_says_why(monkeypatch, tmp_path):
    ref = observed.DaemonSetRef("vendor", "cpu")
    reasons = observed.observed_reasons(ref)
    assert set(reasons) == {"driver-restart", "driver-stop"} <= set(FEATURES)
    assert all("vendor/cpu" in why and "only observes" in why for why in reasons.values())
    sent: list = []
    _answering(monkeypatch, {("daemonset", "cpu", "-n", "vendor"): _daemonset(),
                             ("pods", "-n", "vendor"): {"items": [_pod("w1")]}}, sent)
    deployment = DriverDeployment("vendor/cpu:1.2", "w1", driver_name="dra.cpu")
    worker = observed.ObservedWorker(Kube(tmp_path / "kc", namespace="cci-x-w1"), "w1", deployment, None,
                                     "ab12cd34", ref, _daemonset())
    for act in (worker.pause_driver, worker.resume_driver, worker.restart_driver):
        with pytest.raises(RuntimeError, match="only observes"):
            act()
    worker.remove()
    assert worker.image_ids() == ["docker.io/vendor/cpu@sha256:ab"]
    assert not [a for a in sent if a[0] in ("delete", "patch", "apply")], "observing changed the cluster"


def test_the_cluster_s_own_device_class_is_used_as_it_is_else_one_of_the_run_is_made(monkeypatch, tmp_path):
    ref = observed.DaemonSetRef("vendor", "cpu")
    base = {("daemonset", "cpu", "-n", "vendor"): _daemonset()}
    for has_class, applied in ((True, False), (False, True)):
        sent: list = []
        objects = {**base, **({("deviceclass", "dra.cpu"): {"metadata": {"name": "dra.cpu"}}} if has_class else {})}
        _answering(monkeypatch, objects, sent)
        worker = observed.ObservedWorker(Kube(tmp_path / "kc"), "w1",
                                         DriverDeployment("i:1", "w1", driver_name="dra.cpu"), None, "ab12cd34", ref,
                                         _daemonset())
        worker.ensure_device_class()
        assert any(a[0] == "apply" for a in sent) is applied


def test_a_deploy_refuses_to_take_over_objects_the_cluster_made_and_names_them(monkeypatch, tmp_path):
    theirs = {"metadata": {"name": "dra.cpu", "labels": {"app": "vendor"}}}
    ours = {"metadata": {"name": "dra.cpu", "labels": {RUN_LABEL: "ab12cd34"}}}
    worker = ClusterWorker(Kube(tmp_path / "kc"), "w1", DriverDeployment("i:1", "w1", driver_name="dra.cpu"), None,
                           "ab12cd34")
    sent: list = []
    _answering(monkeypatch, {("deviceclass", "dra.cpu"): theirs}, sent)
    with pytest.raises(RuntimeError, match="DeviceClass dra.cpu already exist") as caught:
        worker.deploy()
    assert "--driver-daemonset" in str(caught.value)
    assert not [a for a in sent if a[0] == "apply"], "nothing is applied once a foreign object is found"
    _answering(monkeypatch, {("deviceclass", "dra.cpu"): ours})
    assert worker.foreign({"kind": "DeviceClass", "metadata": {"name": "dra.cpu"}}) == ""


def test_driver_daemonset_without_the_cluster_backend_is_refused(tmp_path, capsys):
    from cci_conformance.cli import main

    code = main(["run", "--backend", "embedded", "--driver-daemonset", "vendor/cpu", "--report-dir",
                 str(tmp_path / "out")])
    assert code == 2 and "--backend cluster" in capsys.readouterr().err


def test_removing_the_run_s_driver_waits_for_its_own_pods_only(monkeypatch, tmp_path):
    """A refused deploy removes nothing of the cluster's and must not wait for the cluster's own driver pod."""
    vendor = _pod("w1")
    vendor["metadata"]["labels"] = {"app": "cci-dra-cpu"}
    ours = _pod("w1", name="ours")
    ours["metadata"]["labels"] = {"app": "cci-dra-cpu", "cci-conformance.io/node": "w1"}
    worker = ClusterWorker(Kube(tmp_path / "kc"), "w1", DriverDeployment("i:1", "w1", driver_name="dra.cpu"), None,
                           "ab12cd34")
    _answering(monkeypatch, {("pods", "-n", "kube-system"): {"items": [vendor]}})
    assert worker._terminating() is False
    _answering(monkeypatch, {("pods", "-n", "kube-system"): {"items": [vendor, ours]}})
    assert worker._terminating() is True
