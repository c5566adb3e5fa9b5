"""Child process groups are signalled only while their leader is unreaped, so a reused pid is never hit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cci_conformance import procgroup
from cci_conformance.waiting import wait_for


def child(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def test_an_exited_leader_stays_unreaped_until_stopped():
    proc = child("raise SystemExit(3)")
    wait_for(lambda: not procgroup.running(proc), 10, what="the child to exit")
    assert proc.returncode is None  # not reaped: its pid (and group id) cannot be handed out again
    assert os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    assert procgroup.exit_status(proc) == 3
    assert procgroup.stop_group(proc) == 3 and proc.returncode == 3


def test_a_reaped_leader_is_never_signalled(monkeypatch):
    proc = child("pass")
    proc.wait()
    sent = []
    monkeypatch.setattr(os, "killpg", lambda pgid, sig: sent.append((pgid, sig)))
    procgroup.signal_group(proc, signal.SIGKILL)
    procgroup.stop_group(proc)
    assert sent == []  # its id may belong to another process by now


def test_stop_group_kills_children_that_ignore_sigterm():
    code = ("import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
            "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
            "print(c.pid, flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True, stdout=subprocess.PIPE, text=True)
    grandchild = int(proc.stdout.readline())
    assert procgroup.stop_group(proc, grace_s=0.3) == -signal.SIGKILL
    proc.stdout.close()

    def gone() -> bool:
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            return True
        with open(f"/proc/{grandchild}/stat") as fh:  # killed but not yet reaped by init
            return fh.read().split()[2] == "Z"

    wait_for(gone, 10, what="the grandchild to be killed")


@pytest.mark.parametrize("mechanism", ["setpriv", "preexec_fn"])
def test_a_child_dies_with_its_sigkilled_parent(mechanism):
    """The last resort (PR_SET_PDEATHSIG): a SIGKILLed harness runs no cleanup, yet its node and driver go."""
    if mechanism == "setpriv" and procgroup._setpriv() is None:
        pytest.skip("no setpriv with --pdeathsig on this machine")
    fallback = "procgroup._setpriv = lambda: None;" if mechanism == "preexec_fn" else ""
    parent = subprocess.Popen([sys.executable, "-c", (
        f"import subprocess, sys, time; from cci_conformance import procgroup; {fallback}"
        "argv, preexec = procgroup.with_parent_death([sys.executable, '-c', 'import time; time.sleep(120)']);"
        "p = subprocess.Popen(argv, preexec_fn=preexec, start_new_session=True); print(p.pid, flush=True);"
        "time.sleep(120)")], stdout=subprocess.PIPE, text=True, start_new_session=True)
    orphan = int(parent.stdout.readline())
    wait_for(lambda: Path(f"/proc/{orphan}/cmdline").read_bytes().split(b"\0")[1:3] == [b"-c", b"import time; "
             b"time.sleep(120)"], 10, what="the child to exec its command")  # not the parent's argv any more
    parent.kill()
    parent.wait()
    wait_for(lambda: not Path(f"/proc/{orphan}").exists(), 10, what=f"process {orphan} to die with its parent")


def test_a_child_whose_parent_lives_on_is_untouched():
    argv, preexec = procgroup.with_parent_death([sys.executable, "-c", "raise SystemExit(7)"])
    assert subprocess.Popen(argv, preexec_fn=preexec).wait(timeout=30) == 7  # the command's own exit code
    assert subprocess.Popen([sys.executable, "-c", "raise SystemExit(8)"],
                            preexec_fn=procgroup.dies_with_parent()).wait(timeout=30) == 8


def test_thread_states_read_the_field_after_the_last_parenthesis():
    lines = "12 (drv) R 1 12 12\n13 (a) b) (c) T 1 12 12\n14 (x) t 1 12 12\n"
    assert procgroup.thread_states(lines) == {"R", "T", "t"}


def test_a_stopped_group_is_seen_stopped_only_once_every_thread_stopped():
    # a child with a second thread, in a group of its own, as nodes and drivers start
    code = ("import threading, time; threading.Thread(target=time.sleep, args=(60,), daemon=True).start(); "
            "time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        wait_for(lambda: len(os.listdir(f"/proc/{proc.pid}/task")) == 2, 10, what="the child's second thread")
        assert not procgroup.group_stopped(proc.pid)
        os.killpg(proc.pid, signal.SIGSTOP)
        wait_for(lambda: procgroup.group_stopped(proc.pid), 10, interval=0.005, what="the group to stop")
        os.killpg(proc.pid, signal.SIGCONT)
        wait_for(lambda: not procgroup.group_stopped(proc.pid), 10, interval=0.005, what="the group to run again")
    finally:
        procgroup.stop_group(proc)
