"""Clusters of harness runs that died are found by their scratch dir and deleted; live runs' and others' are kept."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from cci_conformance.kind.cluster import lifecycle
from cci_conformance.kind.cluster.lifecycle import CLUSTER_MARKER, WORKDIR_PREFIX, delete_orphans

DEAD_PID = 4194303  # above the default pid_max's live range on these hosts: no such process


def _fake_kind(tmp: Path, clusters: list[str]) -> Path:
    """A `kind` that lists ``clusters`` and records each `delete cluster --name N` in deleted.txt."""
    script = tmp / "kind"
    script.write_text("#!/bin/sh\n"
                      f'if [ "$1" = get ]; then printf "%s\\n" {" ".join(clusters)}; exit 0; fi\n'
                      f'if [ "$1" = delete ]; then echo "$4" >> {tmp}/deleted.txt; exit 0; fi\n'
                      "exit 1\n")
    script.chmod(0o755)
    return script


@pytest.fixture(autouse=True)
def scratch_root(tmp_path, monkeypatch) -> Path:
    """Scratch dirs under the test's own dir: /tmp may hold other runs' (a live kind run, or a dead one's leftovers)."""
    root = tmp_path / "scratch"
    root.mkdir()
    monkeypatch.setattr(lifecycle, "SCRATCH_ROOT", root)
    return root


def _scratch(name: str) -> Path:
    d = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX, dir=lifecycle.SCRATCH_ROOT))
    (d / CLUSTER_MARKER).write_text(name)
    return d


def test_only_clusters_of_dead_harness_runs_are_deleted(tmp_path, monkeypatch):
    assert not Path(f"/proc/{DEAD_PID}").exists()
    networks: list[str] = []
    monkeypatch.setattr(lifecycle, "remove_network", networks.append)  # no docker daemon needed
    dead, live = f"cci-unit-orphan-{DEAD_PID}", f"cci-unit-live-{os.getpid()}"
    dirs = [_scratch(dead), _scratch(live)]
    kind = _fake_kind(tmp_path, [dead, live, f"someone-else-{DEAD_PID}"])
    try:
        assert delete_orphans(kind) == [dead]
        assert (tmp_path / "deleted.txt").read_text().split() == [dead]
        assert not dirs[0].exists() and dirs[1].exists()  # a live run's scratch dir stays
        assert networks == [f"{dead}-net"]
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


def test_a_scratch_dir_loses_its_marker_last(tmp_path, monkeypatch):
    from cci_conformance.kind.cluster import lifecycle

    work = tmp_path / "cci-kind-x"
    for sub in ("a-worker", "b-worker"):
        (work / sub / "sys").mkdir(parents=True)
    (work / "kubeconfig").write_text("k")
    (work / lifecycle.CLUSTER_MARKER).write_text("cci-run-1")
    real = lifecycle.shutil.rmtree
    calls = []

    def killed_midway(path, ignore_errors=False):  # the process dies after the first removal
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real(path, ignore_errors=ignore_errors)
    monkeypatch.setattr(lifecycle.shutil, "rmtree", killed_midway)
    with pytest.raises(KeyboardInterrupt):
        lifecycle.remove_workdir(work)
    assert (work / lifecycle.CLUSTER_MARKER).read_text() == "cci-run-1"  # delete_orphans can still finish it
    monkeypatch.setattr(lifecycle.shutil, "rmtree", real)
    lifecycle.remove_workdir(work)
    assert not work.exists()


def test_every_cluster_name_the_harness_makes_ends_in_its_pid():
    """A name with a number after the pid (cci-dra-<pid>-<n>) once made delete_orphans of another run read <n> as
    the owner's pid, and delete a live cluster when no process <n> ran."""
    pid = str(os.getpid())
    names = [lifecycle.owned_name("cci-dra", "756"), lifecycle.owned_name("cci")]
    assert all(n.rsplit("-", 1)[-1] == pid for n in names), names


def test_an_orphan_that_cannot_be_deleted_is_left_for_a_later_sweep_and_the_others_go(tmp_path, monkeypatch, capsys):
    """A dead run's cluster still being removed (docker: "removal ... is already in progress") failed the next run's
    own cluster, although it was not that run's to delete: now it is said and left, and the sweep goes on."""
    monkeypatch.setattr(lifecycle, "remove_network", lambda name: None)
    stuck, gone = f"cci-unit-stuck-{DEAD_PID}", f"cci-unit-gone-{DEAD_PID - 1}"
    stuck_dir, gone_dir = _scratch(stuck), _scratch(gone)
    kind = tmp_path / "kind"
    kind.write_text("#!/bin/sh\n"
                    f'if [ "$1" = get ]; then printf "%s\\n" {stuck} {gone}; exit 0; fi\n'
                    f'if [ "$4" = {stuck} ]; then echo "removal of container is already in progress" >&2; exit 1; fi\n'
                    f'echo "$4" >> {tmp_path}/deleted.txt\n')
    kind.chmod(0o755)
    assert delete_orphans(kind) == [gone]
    assert (tmp_path / "deleted.txt").read_text().split() == [gone]
    assert (stuck_dir / CLUSTER_MARKER).exists() and not gone_dir.exists()
    assert f"could not delete {stuck}" in capsys.readouterr().err
