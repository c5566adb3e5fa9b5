"""Nodes forked by the fork server behave as started ones: own group, exit status kept until reaped, no leftovers."""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import pytest

from cci_conformance import procgroup
from cci_conformance.node.forkserver import ForkedNode, ForkServer, ForkServerError
from cci_conformance.paths import PROJECT_ROOT
from cci_conformance.waiting import wait_for


@pytest.fixture
def server():
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    s = ForkServer(env, str(PROJECT_ROOT))
    yield s
    s.close()


def spawn(server: ForkServer, tmp_path: Path, config: dict | str):
    path = tmp_path / "node-config.json"
    path.write_text(config if isinstance(config, str) else json.dumps(config))
    return server.spawn(["--config", str(path)], str(PROJECT_ROOT), dict(os.environ), str(tmp_path / "node.log"))


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_node_that_exits_keeps_its_status_until_reaped_and_logs_to_its_file(server, tmp_path):
    node = spawn(server, tmp_path, "{not json")
    wait_for(lambda: not procgroup.running(node), 10, what="the node to exit")
    assert node.returncode is None  # a zombie: its pid (its group id) is not handed out again yet
    assert procgroup.exit_status(node) == 2  # ConfigError's exit code, as `python -m cci_conformance.node` gives
    assert procgroup.stop_group(node) == 2 and node.returncode == 2
    assert "error:" in (tmp_path / "node.log").read_text()


def test_a_node_leads_its_own_group_and_stop_group_kills_it(server, tmp_path):
    node = spawn(server, tmp_path, "{not json")
    assert os.getpgid(node.pid) == node.pid  # already when the spawn is answered (a zombie keeps its group)
    procgroup.stop_group(node)
    assert node.returncode is not None and not alive(node.pid)


def test_closing_the_server_kills_the_nodes_it_forked(server, tmp_path):
    # a node that never gets ready: it blocks reading a FIFO as its config, and lives until killed
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    node = server.spawn(["--config", str(fifo)], str(PROJECT_ROOT), dict(os.environ), str(tmp_path / "node.log"))
    assert procgroup.running(node)
    server.close()
    wait_for(lambda: not alive(node.pid), 10, what="the kernel to kill the orphaned node (its parent-death signal)")
    assert procgroup.exit_status(node) == -signal.SIGKILL  # the server is gone: reported as killed


def test_a_server_that_stops_answering_is_an_error_within_the_deadline(server):
    os.kill(server._proc.pid, signal.SIGSTOP)
    start = time.monotonic()
    with pytest.raises(ForkServerError, match="gave no answer"):
        server.request({"op": "peek", "pid": 1}, timeout=0.5)
    assert time.monotonic() - start < 5
    assert not server.alive  # killed, never left stopped


def test_a_bad_request_is_answered_with_its_error_and_the_server_goes_on(server, tmp_path):
    with pytest.raises(ForkServerError, match="unknown op"):
        server.request({"op": "dance"})
    with pytest.raises(ForkServerError, match="ChildProcessError"):
        server.request({"op": "peek", "pid": os.getpid()})  # not its child
    node = spawn(server, tmp_path, "{not json")
    wait_for(lambda: not procgroup.running(node), 10, what="the node to exit")
    assert procgroup.stop_group(node) == 2


def embedded_session():
    """An embedded session without a driver, in a short scratch path (unix socket paths are short)."""
    from cci_conformance.backends.base import SessionConfig
    from cci_conformance.backends.embedded import EmbeddedSession
    from cci_conformance.certify.settings import load_node_profile, load_topology

    return EmbeddedSession(SessionConfig(load_topology("laptop-1s4c-smt2"), load_node_profile("coexistence"),
                                         None, Path(tempfile.mkdtemp(prefix="cci-", dir="/tmp"))))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux-only")
def test_the_embedded_backend_starts_its_node_from_the_fork_server():
    session = embedded_session()
    try:
        assert isinstance(session._node, ForkedNode)
        first = session.node_pid
        session.restart_node(hard=True)
        assert session.node_pid not in (None, first) and not alive(first)
        assert session.client.ping(timeout=5).generation >= 1
    finally:
        session.close()
    assert session.node_pid is None and not session.workdir.exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux-only")
def test_a_killed_fork_server_takes_its_nodes_and_the_next_start_gets_a_new_one():
    session = embedded_session()
    try:
        old = session._node
        os.kill(old.server._proc.pid, signal.SIGKILL)
        wait_for(lambda: not alive(old.pid), 10, what="the kernel to kill the node of the killed fork server")
        assert session.node_pid is None  # reported gone, never signalled again
        session.restart_node(hard=True)
        assert session._node.server is not old.server and session.client.ping(timeout=5).generation >= 1
    finally:
        session.close()
