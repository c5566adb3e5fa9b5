"""One long-lived shell per kind node: a script run in the node costs a pipe round trip instead of a docker exec.

A ``docker exec`` costs 100-150 ms and about 0.2 CPU-seconds of dockerd, containerd and runc on a 2-core host,
which the kubelet under test needs; a run of one machine made over a thousand of them (its reads of the node,
docs/measurements/kind.md). The shell is one ``docker exec -i <node> sh``: each script runs in it as
``sh -c`` under the node's ``timeout`` (so a hung command ends inside the node as well), its stdout and stderr
go to files of this shell, and a line with a fresh token, the exit status and both lengths tells where the
output ends. A shell that breaks (the node went, a read missed its deadline) is killed and the next script
starts a new one.
"""

from __future__ import annotations

import atexit
import os
import secrets
import selectors
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass

from ...procgroup import with_parent_death

START_TIMEOUT_S = 30
MARGIN_S = 5  # beyond a script's own deadline: the node's `timeout` ends it first, this ends a lost shell


class ShellBroken(RuntimeError):
    """The node's shell did not answer (it was killed; the next script starts another)."""


@dataclass(frozen=True)
class ShellResult:
    status: int
    stdout: bytes
    stderr: bytes


class NodeShell:
    """``sh`` in one kind node, kept open for the process's scripts in that node (one at a time)."""

    def __init__(self, node: str):
        self.node = node
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._files = f"/tmp/.cci-shell-{os.getpid()}-{secrets.token_hex(4)}"
        self._buffer = b""

    def run(self, script: str, timeout: float) -> ShellResult:
        """Run ``sh -c script`` in the node, ended by the node's ``timeout`` after ``timeout`` seconds."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            token = secrets.token_hex(8)
            out, err = f"{self._files}.out", f"{self._files}.err"
            line = (f"timeout -s KILL {max(1, int(timeout + 0.999))} sh -c {shlex.quote(script)} </dev/null "
                    f">{out} 2>{err}; rc=$?; printf '\\n{token} %d %d %d\\n' $rc $(wc -c <{out}) $(wc -c <{err}); "
                    f"cat {out} {err}\n")
            try:
                self._proc.stdin.write(line.encode())
                self._proc.stdin.flush()
                return self._answer(token, time.monotonic() + timeout + MARGIN_S)
            except (OSError, ShellBroken, ValueError) as exc:
                self._kill()
                raise ShellBroken(f"the shell in {self.node} broke: {exc}") from None

    def _start(self) -> None:
        self._kill()
        # Its own session: a Ctrl-C of the run must not end the shell its cleanup still needs; the kernel ends it
        # with the harness (with_parent_death), and the node's sh with it (its stdin closes).
        argv, preexec = with_parent_death(["docker", "exec", "-i", self.node, "sh"])
        self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      start_new_session=True, preexec_fn=preexec)
        self._buffer = b""
        token = secrets.token_hex(8)
        self._proc.stdin.write(f"printf '\\n{token} 0 0 0\\n'\n".encode())
        self._proc.stdin.flush()
        try:
            self._answer(token, time.monotonic() + START_TIMEOUT_S)
        except ShellBroken:
            self._kill()
            raise

    def _answer(self, token: str, deadline: float) -> ShellResult:
        """Read up to the token's line, then exactly the lengths it names."""
        marker = f"\n{token} ".encode()
        while marker not in self._buffer or b"\n" not in self._buffer.split(marker, 1)[1]:
            self._fill(deadline)
        _, rest = self._buffer.split(marker, 1)
        head, rest = rest.split(b"\n", 1)
        status, n_out, n_err = (int(x) for x in head.split())
        self._buffer = rest
        while len(self._buffer) < n_out + n_err:
            self._fill(deadline)
        body, self._buffer = self._buffer[:n_out + n_err], self._buffer[n_out + n_err:]
        return ShellResult(status, body[:n_out], body[n_out:])

    def _fill(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ShellBroken("no answer before the deadline")
        with selectors.DefaultSelector() as selector:
            selector.register(self._proc.stdout, selectors.EVENT_READ)
            if not selector.select(left):
                raise ShellBroken("no answer before the deadline")
        chunk = os.read(self._proc.stdout.fileno(), 1 << 20)
        if not chunk:
            raise ShellBroken(f"the shell ended (exit {self._proc.poll()})")
        self._buffer += chunk

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait(timeout=10)
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass

    def close(self) -> None:
        with self._lock:
            self._kill()


_SHELLS: dict[str, NodeShell] = {}
_SHELLS_LOCK = threading.Lock()


def shell_for(node: str) -> NodeShell:
    """This process's shell in ``node`` (made on first use)."""
    with _SHELLS_LOCK:
        if node not in _SHELLS:
            _SHELLS[node] = NodeShell(node)
        return _SHELLS[node]


def close_shells(prefix: str = "") -> None:
    """Close this process's shells in nodes whose names start with ``prefix`` (a cluster's, when it is deleted)."""
    with _SHELLS_LOCK:
        gone = [name for name in _SHELLS if name.startswith(prefix)]
        shells = [_SHELLS.pop(name) for name in gone]
    for shell in shells:
        shell.close()


atexit.register(close_shells)
