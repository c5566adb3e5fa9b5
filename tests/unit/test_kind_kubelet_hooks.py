"""The kubelet hook tests' runner: which files and packages, where they land, and that they are not image inputs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cci_conformance.kind.image import kubelet_cci, kubelet_hooks


def test_the_hook_tests_cover_the_packages_the_patches_touch():
    files = kubelet_hooks.hook_test_files()
    assert kubelet_hooks.packages_of(files) == (
        "k8s.io/kubernetes/pkg/kubelet/cm", "k8s.io/kubernetes/pkg/kubelet/cm/cpumanager",
        "k8s.io/kubernetes/pkg/kubelet/cm/dra")
    # every test the runner selects is ours: the upstream tests of those packages are not run
    for rel, text in files:
        assert "func TestCCI" in text, rel
        assert "\nfunc Test" not in text.replace("\nfunc TestCCI", ""), f"{rel}: a test not named TestCCI... never runs"
    # each package a patch adds a file to has tests
    added = {line.split("b/", 1)[1].rsplit("/", 1)[0] for _, text in kubelet_cci.read_inputs().patches
             for line in text.splitlines() if line.startswith("+++ b/")}
    assert added <= {str(Path(rel).parent) for rel, _ in files}, added


def test_hook_tests_are_not_inputs_of_the_kubelet_build(tmp_path):
    ours, api = tmp_path / "kubelet-cci", tmp_path / "api"
    shutil.copytree(kubelet_cci.KUBELET_CCI, ours)
    shutil.copytree(kubelet_cci.API, api)
    before = kubelet_cci.read_inputs(ours, api).key("go1.0")
    extra = ours / "testdata" / "hooks" / "pkg" / "kubelet" / "cm" / "zz_test.go"
    extra.write_text("package cm\n")
    assert kubelet_cci.read_inputs(ours, api).key("go1.0") == before


def test_a_stray_file_or_a_missing_package_is_named(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "notes.md").write_text("x")
    with pytest.raises(ValueError, match="only Go test files belong under"):
        kubelet_hooks.hook_test_files(tmp_path)
    with pytest.raises(FileNotFoundError, match="no \\*_test.go under"):
        kubelet_hooks.hook_test_files(tmp_path / "pkg" / "nothing")
    source = tmp_path / "kubernetes"
    (source / "pkg" / "kubelet" / "cm").mkdir(parents=True)
    kubelet_hooks.lay_tests(source, (("pkg/kubelet/cm/a_test.go", "package cm\n"),))
    assert (source / "pkg/kubelet/cm/a_test.go").read_text() == "package cm\n"
    with pytest.raises(FileNotFoundError, match="pkg/kubelet/gone is not a package of k8s.io/kubernetes"):
        kubelet_hooks.lay_tests(source, (("pkg/kubelet/gone/a_test.go", "package gone\n"),))
