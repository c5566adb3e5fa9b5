"""The plugin watcher keeps a serving driver registered across socket re-creation and never records a stale socket."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from pathlib import Path

import grpc
import pytest

from cci_conformance.node.fakedriver import FakeDriver
from cci_conformance.node.watcher import PluginWatcher
from cci_conformance.protocol.protos import cci_v1alpha1_pb2 as pb


@pytest.fixture
def kubelet_root():
    root = Path(tempfile.mkdtemp(prefix="cci-w-", dir="/tmp"))  # short: unix socket paths <= 107 bytes
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def watcher(kubelet_root):
    w = PluginWatcher(kubelet_root / "plugins_registry", kubelet_root / "plugins", poll_s=0.05, rpc_timeout_s=2.0)
    w.registry_dir.mkdir(parents=True, exist_ok=True)
    yield w
    w.stop()


def stale_socket(path: Path) -> None:
    """What a SIGKILLed driver leaves: a socket file nobody listens on (connect is refused)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()


def test_socket_replaced_between_scan_and_getinfo_is_not_deregistered_later(kubelet_root, watcher):
    """A restarting driver replaces a stale socket after the scan saw it and before GetInfo reached it.

    The watcher used to record the scanned (stale) identity, so its next poll saw a "change" and
    deregistered the serving driver for a moment: admissions in that gap failed (issue 12's flake).
    """
    driver = FakeDriver(kubelet_root)
    stale_socket(driver.reg_socket)
    original = watcher._register
    started: list[FakeDriver] = []

    def replace_then_register(path):
        if not started:
            started.append(driver.start())  # unlinks the stale socket, binds a new one, serves
        return original(path)

    watcher._register = replace_then_register
    try:
        watcher.poll_once()
        assert watcher.get("fake") is not None and watcher.registrations == 1
        conn = watcher.get("fake")
        for _ in range(3):
            watcher.poll_once()
            assert watcher.get("fake") is conn, "a serving driver was deregistered or reconnected"
        assert watcher.registrations == 1, "the unchanged socket was registered again"
    finally:
        driver.stop()


def test_restarted_driver_is_registered_throughout_and_served_at_once(kubelet_root, watcher):
    """A driver re-created behind the same endpoint stays registered through the poll that notices it; the
    next call reaches the new process at once (a fresh channel, not one in reconnect backoff)."""
    first = FakeDriver(kubelet_root).start()
    try:
        watcher.poll_once()
        old = watcher.get("fake")
        assert old is not None
    finally:
        first.stop()
    with pytest.raises(grpc.RpcError):  # the dead driver's channel goes into reconnect backoff
        old.stub.CCIAdmit(pb.AdmitRequest(claim_uid="dead", availableCpus="0-3"), timeout=2.0)
    second = FakeDriver(kubelet_root).start()
    try:
        watcher.poll_once()
        conn = watcher.get("fake")
        assert conn is not None and watcher.registrations == 2
        reply = conn.stub.CCIAdmit(pb.AdmitRequest(claim_uid="u", availableCpus="0-3"), timeout=5.0)
        assert reply.err == "" and second.of("admit")
        # the replaced channel stays open for calls still on it (closed after their deadline)
        old.stub.CCIAdmit(pb.AdmitRequest(claim_uid="v", availableCpus="0-3"), timeout=5.0, wait_for_ready=True)
    finally:
        second.stop()


def test_touched_socket_is_asked_again_without_a_gap(kubelet_root, watcher):
    """A socket whose times changed is re-registered; the driver is registered before, during and after."""
    with FakeDriver(kubelet_root) as driver:
        watcher.poll_once()
        assert watcher.get("fake") is not None
        st = os.stat(driver.reg_socket)
        os.utime(driver.reg_socket, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        seen_during = []
        original = watcher._register
        watcher._register = lambda path: (seen_during.append(watcher.get("fake")), original(path))[1]
        watcher.poll_once()
        assert seen_during and seen_during[0] is not None, "the driver was dropped before it was asked again"
        assert watcher.get("fake") is not None and watcher.registrations == 2


def test_replacement_that_does_not_answer_deregisters(kubelet_root, watcher):
    """A socket re-created by a process that does not serve: the driver is gone until something answers."""
    with FakeDriver(kubelet_root) as driver:
        watcher.poll_once()
        assert watcher.get("fake") is not None
        reg = driver.reg_socket
    stale_socket(reg)
    watcher.poll_once()
    assert watcher.get("fake") is None and watcher.names() == ()


def test_vanished_socket_deregisters(kubelet_root, watcher):
    with FakeDriver(kubelet_root):
        watcher.poll_once()
        assert watcher.names() == ("fake",)
    watcher.poll_once()
    assert watcher.names() == ()
