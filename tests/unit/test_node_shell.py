"""The long-lived node shell: a script's stdout, stderr and status come back whole, and a deadline ends it."""

from __future__ import annotations

import os
import time

import pytest

from cci_conformance.kind.cci import node_view
from cci_conformance.kind.cluster import node_shell


@pytest.fixture
def fake_docker(tmp_path, monkeypatch):
    """`docker exec [-i] NODE CMD...` runs CMD here: the shell's protocol without a container."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text('#!/bin/sh\n# docker exec [-i] NODE CMD...\nshift\n[ "$1" = -i ] && shift\nshift\nexec "$@"\n')
    docker.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    yield
    node_shell.close_shells()


def test_scripts_come_back_whole_one_after_another(fake_docker):
    shell = node_shell.shell_for("n1")
    assert shell.run("echo out; echo err >&2", 10) == node_shell.ShellResult(0, b"out\n", b"err\n")
    assert shell.run("printf 'no newline'", 10).stdout == b"no newline"
    assert len(shell.run("head -c 3000000 /dev/zero", 10).stdout) == 3_000_000
    assert shell.run("echo gone >&2; exit 3", 10) == node_shell.ShellResult(3, b"", b"gone\n")
    assert shell.run("echo $$", 10).stdout != shell.run("echo $$", 10).stdout  # each script its own sh -c


def test_node_exec_raises_with_the_scripts_stderr_and_ends_a_hung_script_at_its_deadline(fake_docker):
    with pytest.raises(node_view.NodeReadError, match="exited 3: bad"):
        node_view.node_exec("n1", "echo bad >&2; exit 3")
    started = time.monotonic()
    with pytest.raises(node_view.NodeReadError, match="did not finish within 1 s"):
        node_view.node_exec("n1", "sleep 30", timeout=1)
    assert time.monotonic() - started < 5
    assert node_view.node_exec("n1", "echo after") == "after\n"  # the same shell goes on


def test_a_broken_shell_is_replaced_and_the_script_still_runs(fake_docker):
    shell = node_shell.shell_for("n1")
    shell.run("true", 10)
    os.killpg(shell._proc.pid, 9)  # the shell died (e.g. its node restarted)
    assert node_view.node_exec("n1", "echo again") == "again\n"
    assert shell.run("echo fresh", 10).stdout == b"fresh\n"


def test_closing_a_clusters_shells_leaves_no_process(fake_docker):
    shells = [node_shell.shell_for(name) for name in ("cci-run-1-worker", "cci-run-1-worker2", "other-worker")]
    for shell in shells:
        shell.run("true", 10)
    procs = [shell._proc for shell in shells]
    node_shell.close_shells("cci-run-1-")
    assert procs[0].poll() is not None and procs[1].poll() is not None
    assert procs[2].poll() is None  # another cluster's shell stays
