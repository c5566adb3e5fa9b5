"""The node image's file tree: what kind, kubeadm and containerd expect to find, with fake binaries."""

from __future__ import annotations

import os
import shutil
import tempfile
import tomllib
from pathlib import Path

import pytest

from cci_conformance.kind.image import node_files, nodeimage, versions


@pytest.fixture
def tree():
    work = Path(tempfile.mkdtemp(prefix="cci-test-nodefiles-", dir="/tmp"))
    bins = {}
    for group, names in (("k8s", ("kubeadm", "kubelet", "kubectl")),
                         ("ctrd", ("containerd", "containerd-shim-runc-v2", "ctr")), ("crictl", ("crictl",))):
        (work / group).mkdir()
        for name in names:
            (work / group / name).write_text(f"fake {name}")
        bins[group] = work / group
    recorder = work / "recorder"
    recorder.write_text("fake recorder")
    patched = work / "kubelet-cci"  # the CCI-patched kubelet: /usr/bin/kubelet, not the stock build's
    patched.write_text("fake patched kubelet")
    files = work / "files"
    nodeimage._node_files(files, bins["k8s"], patched, bins["ctrd"], bins["crictl"], recorder,
                          "registry.k8s.io/pause:9")
    yield files
    shutil.rmtree(work, ignore_errors=True)


def test_kind_finds_version_manifests_and_kube_binaries(tree):
    assert (tree / "kind/version").read_text().strip() == versions.KUBERNETES
    assert (tree / "kind/manifests/default-cni.yaml").is_file()
    assert (tree / "kind/manifests/default-storage.yaml").is_file()
    for name in ("kubeadm", "kubelet", "kubectl"):
        assert os.access(tree / "usr/bin" / name, os.X_OK)
    assert (tree / "usr/bin/kubelet").read_text() == "fake patched kubelet"
    for name in ("cci-node-entrypoint", "cci-node-cni", "containerd", "crictl", "ctr"):
        assert os.access(tree / "usr/local/bin" / name, os.X_OK), name
    drop_in = (tree / "etc/systemd/system/kubelet.service.d/10-kubeadm.conf").read_text()
    assert "$KUBELET_KUBEADM_ARGS" in drop_in and "--config=/var/lib/kubelet/config.yaml" in drop_in


def test_containerd_runs_runc_through_the_recorder_with_nri_on(tree):
    config = tomllib.loads((tree / "etc/containerd/config.toml").read_text())
    plugins = config["plugins"]
    runc = plugins["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]["runc"]["options"]
    assert runc == {"SystemdCgroup": True, "BinaryName": "/usr/local/sbin/cpuset-recorder"}
    assert os.access(tree / "usr/local/sbin/cpuset-recorder", os.X_OK)
    assert plugins["io.containerd.nri.v1.nri"]["disable"] is False
    assert plugins["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"] == "registry.k8s.io/pause:9"
    assert config["version"] == 3


def test_image_keeps_systemd_stop_signal_and_our_entrypoint():
    assert "STOPSIGNAL SIGRTMIN+3" in nodeimage.DOCKERFILE
    assert '"/usr/local/bin/cci-node-entrypoint", "/sbin/init"' in nodeimage.DOCKERFILE
    assert "version = 3" in node_files.containerd_config("x:1")
