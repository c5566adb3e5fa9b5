"""Unit tests of the patched-kubelet build step: what keys its cache, how it lays modules, that the patches apply."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cci_conformance.kind.image import gobuild, kubelet_cci
from cci_conformance.kind.runner import CommandFailed


@pytest.fixture
def sources(tmp_path: Path) -> tuple[Path, Path]:
    """Copies of kubelet-cci/ and api/ that a test may change."""
    ours, api = tmp_path / "kubelet-cci", tmp_path / "api"
    shutil.copytree(kubelet_cci.KUBELET_CCI, ours)
    shutil.copytree(kubelet_cci.API, api)
    return ours, api


def _key(ours: Path, api: Path) -> str:
    return kubelet_cci.read_inputs(ours, api).key("go1.0")


def test_inputs_digest_follows_the_patches_and_the_package_but_not_its_tests(sources):
    ours, api = sources
    base = _key(ours, api)
    assert _key(ours, api) == base, "the digest must be stable for unchanged inputs"

    patch = sorted((ours / "patches").glob("*.patch"))[0]
    patch.write_text(patch.read_text() + "\n")
    assert _key(ours, api) != base, "a changed patch must rebuild the kubelet"
    patch.write_text(patch.read_text()[:-1])
    assert _key(ours, api) == base

    (ours / "ccimanager" / "zz_extra_test.go").write_text("package ccimanager\n")
    assert _key(ours, api) == base, "a Go test file is not part of the kubelet"

    (ours / "ccimanager" / "zz_extra.go").write_text("package ccimanager\n")
    changed_package = _key(ours, api)
    assert changed_package != base, "a change to the CCI package must rebuild the kubelet"

    stub = next(api.rglob("*.pb.go"))
    stub.write_text(stub.read_text() + "// changed\n")
    assert _key(ours, api) != changed_package, "the protocol stubs are linked in too"


def test_inputs_name_what_is_missing(sources, tmp_path):
    ours, api = sources
    for patch in (ours / "patches").glob("*.patch"):
        patch.unlink()
    with pytest.raises(FileNotFoundError, match="no \\*.patch under .*patches"):
        kubelet_cci.read_inputs(ours, api)
    with pytest.raises(FileNotFoundError, match="go.mod is missing"):
        kubelet_cci.read_inputs(kubelet_cci.KUBELET_CCI, tmp_path / "nowhere")


def test_wrapper_module_builds_the_patched_copy_and_our_modules_from_directories(tmp_path, monkeypatch):
    upstream = ("module k8s.io/kubernetes\nrequire (\n\tk8s.io/api v0.0.0\n)\n"
                "replace k8s.io/api => ./staging/src/k8s.io/api\n")
    monkeypatch.setattr(gobuild, "_upstream_gomod", lambda component, workdir, log: upstream)
    component = gobuild.GoComponent(name="k", module="k8s.io/kubernetes", version="v1.34.12",
                                    binaries={"kubelet": "k8s.io/kubernetes/cmd/kubelet"},
                                    local_replace_version="v0.34.12")
    gobuild.write_wrapper_module(component, tmp_path, tmp_path / "log", local_dirs={
        "k8s.io/kubernetes": "kubernetes", kubelet_cci.PACKAGE_MODULE: "kubelet-cci"})
    gomod = (tmp_path / "go.mod").read_text()
    assert "require k8s.io/kubernetes v1.34.12" in gomod
    assert "\tk8s.io/api => k8s.io/api v0.34.12" in gomod  # staging still comes from the proxy
    assert "\tk8s.io/kubernetes => ./kubernetes" in gomod
    assert f"\t{kubelet_cci.PACKAGE_MODULE} => ./kubelet-cci" in gomod
    assert '_ "k8s.io/kubernetes/cmd/kubelet"' in (tmp_path / "tools.go").read_text()


def _module_source() -> Path | None:
    """The k8s.io/kubernetes source in the build's module cache, if a build already downloaded it."""
    root = Path(gobuild.go_env()["GOMODCACHE"]) / "k8s.io" / f"kubernetes@{kubelet_cci.components.KUBERNETES.version}"
    return root if (root / "pkg" / "kubelet" / "cm").is_dir() else None


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("patch") is None, reason="needs the patch program")
def test_every_patch_applies_cleanly_to_the_pinned_kubernetes(tmp_path):
    source = _module_source()
    if source is None:
        pytest.skip("k8s.io/kubernetes is not in the build's module cache (run `cci-conformance kind "
                    "build-node-image` once)")
    tree = tmp_path / "kubernetes"
    shutil.copytree(source / "pkg" / "kubelet" / "cm", tree / "pkg" / "kubelet" / "cm")
    subprocess.run(["chmod", "-R", "u+w", str(tree)], check=True)
    inputs = kubelet_cci.read_inputs()
    kubelet_cci.apply_patches(tree, inputs.patches, tmp_path / "log")
    cm = tree / "pkg" / "kubelet" / "cm"
    assert "cm.cci.admitHandler(cm.topologyManager)" in (cm / "container_manager_linux.go").read_text()
    assert "isCCIDriver(result.Driver)" in (cm / "dra" / "claiminfo.go").read_text()
    assert "m.cciAffinity(podUID, containerName)" in (cm / "cpumanager" / "cpu_manager.go").read_text()
    for added in ("cci_linux.go", "cpumanager/cci_pool.go", "dra/cci.go"):
        assert (cm / added).is_file()
    # a second application must fail loudly (the build never patches a tree twice)
    with pytest.raises(CommandFailed, match="does not apply to k8s.io/kubernetes v1.34.12"):
        kubelet_cci.apply_patches(tree, inputs.patches[:1], tmp_path / "log")
