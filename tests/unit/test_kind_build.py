"""Unit tests of the node-image build helpers that need neither docker nor network."""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
import tempfile
from pathlib import Path

from cci_conformance.kind.cluster import hostguard
from cci_conformance.kind.image import components, control_plane
from cci_conformance.kind.image.gobuild import local_replaces
from cci_conformance.kind.image.oci_archive import ImageSpec, layer_bytes, write_archive


def test_local_replaces_are_found_in_both_go_mod_forms():
    gomod = """module k8s.io/kubernetes
require (
	k8s.io/api v0.0.0
	k8s.io/client-go v0.0.0 // indirect
	go.etcd.io/etcd/api/v3 v3.6.5
	github.com/x/y v1.0.0
)
replace k8s.io/api => ./staging/src/k8s.io/api
replace go.etcd.io/etcd => ./FORBIDDEN_DEPENDENCY
replace (
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tgo.etcd.io/etcd/api/v3 v3.6.5 => ../api
\tgithub.com/x/y => github.com/x/z v1.0.0
)
"""
    assert local_replaces(gomod) == ["k8s.io/api", "k8s.io/client-go", "go.etcd.io/etcd/api/v3"]


def test_kubernetes_is_stamped_with_its_version():
    flags = " ".join(components.KUBERNETES.ldflags)
    version = components.KUBERNETES.version
    assert f"k8s.io/component-base/version.gitVersion={version}" in flags
    assert "gitMinor=" + version.split(".")[1] in flags
    assert set(components.KUBERNETES.binaries) == {
        "kubeadm", "kubelet", "kubectl", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"}


def test_image_roles_follow_kubeadm_names():
    assert control_plane.role_of("registry.k8s.io/coredns/coredns:v1.12.1") == "coredns"
    assert control_plane.role_of("registry.k8s.io/etcd:3.6.5-0") == "etcd"


def test_oci_archive_is_importable_layout_with_matching_digests():
    work = Path(tempfile.mkdtemp(prefix="cci-test-oci-", dir="/tmp"))
    try:
        _check_archive(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _check_archive(work: Path) -> None:
    binary = work / "prog"
    binary.write_bytes(b"\x7fELF fake")
    binary.chmod(0o755)
    spec = ImageSpec("registry.k8s.io/pause:3.10.1", {"/pause": binary}, entrypoint=["/pause"])
    assert layer_bytes(spec) == layer_bytes(spec), "layers must be reproducible"
    archive = write_archive(spec, work / "pause.tar")
    with tarfile.open(archive) as tar:
        blobs = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    index = json.loads(blobs["index.json"])
    (entry,) = index["manifests"]
    assert entry["annotations"]["io.containerd.image.name"] == "registry.k8s.io/pause:3.10.1"
    for name, data in blobs.items():
        if name.startswith("blobs/sha256/"):
            assert hashlib.sha256(data).hexdigest() == name.rsplit("/", 1)[1]
    manifest = json.loads(blobs["blobs/sha256/" + entry["digest"].split(":")[1]])
    layer = blobs["blobs/sha256/" + manifest["layers"][0]["digest"].split(":")[1]]
    config = json.loads(blobs["blobs/sha256/" + manifest["config"]["digest"].split(":")[1]])
    assert config["rootfs"]["diff_ids"] == [manifest["layers"][0]["digest"]]
    assert config["config"]["Entrypoint"] == ["/pause"]
    with tarfile.open(fileobj=__import__("io").BytesIO(layer)) as tar:
        member = tar.getmember("pause")
        assert member.mode == 0o755 and tar.extractfile(member).read() == b"\x7fELF fake"


def test_hostguard_reports_and_restores_nothing_when_unchanged():
    before = hostguard.read_sysctls()
    assert "kernel/panic_on_oops" in before
    assert hostguard.changed(before) == {}
    fake = dict(before, **{"kernel/panic_on_oops": "not-a-value"})
    assert hostguard.changed(fake) == {"kernel/panic_on_oops": ("not-a-value", before["kernel/panic_on_oops"])}


def test_cached_only_refuses_to_build_but_reuses(monkeypatch):
    import pytest

    from cci_conformance.kind.image import cache

    monkeypatch.setenv("CCI_KIND_CACHE", tempfile.mkdtemp(prefix="cci-test-cache-", dir="/tmp"))
    try:
        done = cache.Step("demo", "v1")
        done.prepare()
        done.finish()
        with cache.cached_only():
            assert cache.Step("demo", "v1").done  # a cached step is reused
            with pytest.raises(cache.NotCached, match="demo"):
                cache.Step("demo", "v2").prepare()
        cache.Step("demo", "v2").prepare()  # outside the block building is allowed again
    finally:
        shutil.rmtree(cache.cache_root(), ignore_errors=True)


def test_the_exit_sweep_never_builds_kind_and_finds_it_when_built(monkeypatch):
    """A failing pytester run of the DRA suites built kind at exit (30-60 s each, minutes per unit-test run): the
    sweep asked through cache.cached_only(), whose context variable a module imported afresh does not see."""
    from cci_conformance.kind.cci import run_cluster
    from cci_conformance.kind.cluster import toolchain
    from cci_conformance.kind.image import components, gobuild, versions

    monkeypatch.setenv("CCI_KIND_CACHE", tempfile.mkdtemp(prefix="cci-test-cache-", dir="/tmp"))
    monkeypatch.setattr(gobuild, "go_version", lambda: "go1.test")
    monkeypatch.setattr(toolchain, "docker_problem", lambda: None)
    monkeypatch.setattr(gobuild, "build", lambda component: (_ for _ in ()).throw(AssertionError("built")))
    swept = []
    monkeypatch.setattr(run_cluster, "delete_orphans", lambda kind: swept.append(kind) or [])
    try:
        assert toolchain.built_kind_binary() is None
        run_cluster.sweep_orphans()  # nothing built: no build, no sweep
        assert swept == []
        step = gobuild.Step("go-kind", components.for_release(versions.CCI).kind, "go1.test")
        step.prepare()
        step.finish()
        assert toolchain.built_kind_binary() == step.dir / "bin" / "kind"
        run_cluster.sweep_orphans()
        assert swept == [step.dir / "bin" / "kind"]
    finally:
        from cci_conformance.kind.image import cache
        shutil.rmtree(cache.cache_root(), ignore_errors=True)
