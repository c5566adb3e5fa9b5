"""Node processes forked from one process that has already imported the node, instead of a new interpreter each.

A default certification starts about 130 node processes (every fresh node, every node restart of ACCT-010 and
the restart suites), and a new interpreter spends about 170 ms of CPU importing grpc, protobuf and the node
before it serves; that was a fifth of the run's CPU (docs/measurements/embedded.md). The fork server imports
them once per harness process and forks a node per request, so a node still starts from nothing but its files:
a new process with no state of the old one, killed, paused and restarted exactly as before.

The fork server never reaps a node by itself: the harness asks for its exit (``peek``, which leaves it a zombie)
and reaps it (``reap``) once it has signalled its process group, so the node's pid, which is its group id, is
never reused while the harness may still signal it (procgroup.py). Each node is a session leader, killed by the
kernel when the fork server goes, and the fork server when the harness goes (PR_SET_PDEATHSIG).

Protocol, one JSON object a line on the server's stdin and stdout: ``{"op": "spawn", "args", "cwd", "env",
"log"}`` -> ``{"pid"}``; ``{"op": "peek"|"reap", "pid"}`` -> ``{"status"}`` (``Popen.returncode`` semantics,
null while it runs); any failure -> ``{"error"}``. The server starts by writing ``{"ready": true}``.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import traceback

from ..procgroup import dies_with_parent, returncode_of, with_parent_death

REPLY_TIMEOUT_S = 10.0  # a request is a fork or a waitid: milliseconds, unless the server is gone
START_TIMEOUT_S = 60.0  # the imports, on a loaded 2-core host
REAP_TIMEOUT_S = 10.0  # reap follows a SIGKILL of the group: the leader is gone in milliseconds
MAX_FD = 65536


class ForkServerError(RuntimeError):
    """The fork server did not start or stopped answering."""


# ---- the server process ----
def _run_node(request: dict, arm, led: int) -> None:
    """In the forked child: become what ``python -m cci_conformance.node ARGS`` would be, then exit."""
    code = 1
    try:
        os.setsid()  # its own process group, as Popen(start_new_session=True) gives: the harness signals the group
        if arm is not None:
            arm()  # made before the fork: it checks that its parent is still the server
        os.close(led)  # the server answers the spawn only now: a killpg right after it finds the group
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.closerange(3, MAX_FD)  # the log, /dev/null and whatever else the server had open
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [sys.argv[0], *request["args"]]
        from .__main__ import main

        code = main(list(request["args"])) or 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - a node that raises exits 1 with the traceback in its log
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def _handle(request: dict) -> dict:
    op, pid = request.get("op"), request.get("pid")
    if op == "spawn":
        arm = dies_with_parent()
        wait_end, led = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(wait_end)
            _run_node(request, arm, led)
        os.close(led)
        os.read(wait_end, 1)  # EOF once the child closed its end: it leads its group (or it died trying)
        os.close(wait_end)
        return {"pid": child}
    if op == "peek":
        return {"status": returncode_of(os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT))}
    if op == "reap":
        _, raw = os.waitpid(pid, 0)
        return {"status": os.waitstatus_to_exitcode(raw)}
    return {"error": f"unknown op {op!r}"}


def serve() -> None:
    """The server's loop: until its stdin closes (the harness ended), then it exits and the kernel kills what
    it forked and nobody stopped."""
    from . import __main__  # noqa: F401 - the imports every node would otherwise pay for

    reply = sys.stdout
    reply.write(json.dumps({"ready": True}) + "\n")
    reply.flush()
    for line in sys.stdin:
        try:
            answer = _handle(json.loads(line))
        except Exception as exc:  # noqa: BLE001 - answered, the server goes on
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        reply.write(json.dumps(answer) + "\n")
        reply.flush()


# ---- the harness side ----
class ForkedNode:
    """A node process forked by the server: the parts of ``subprocess.Popen`` the embedded backend and
    procgroup.py use (``pid``, ``returncode``, ``wait``, ``peek``)."""

    def __init__(self, server: ForkServer, pid: int):
        self.server, self.pid = server, pid
        self.returncode: int | None = None

    def peek(self) -> int | None:
        """Its exit status if it exited (it stays a zombie, its pid reserved), else None."""
        if self.returncode is not None:
            return self.returncode
        try:
            return self.server.request({"op": "peek", "pid": self.pid})["status"]
        except ForkServerError:  # the server is gone, and the kernel killed its nodes with it
            self.returncode = -signal.SIGKILL
            return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Reap it (after its group was signalled: the reply waits for its exit); its exit status."""
        if self.returncode is None:
            try:
                self.returncode = self.server.request({"op": "reap", "pid": self.pid},
                                                      timeout or REAP_TIMEOUT_S)["status"]
            except ForkServerError:  # no answer: the server was stopped, and the kernel killed its nodes
                self.returncode = -signal.SIGKILL
        return self.returncode


class ForkServer:
    """One fork server process of this harness process, started on first use."""

    def __init__(self, env: dict[str, str], cwd: str):
        argv, preexec = with_parent_death([sys.executable, "-m", "cci_conformance.node.forkserver"])
        self._proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, start_new_session=True, preexec_fn=preexec)
        self._lock = threading.Lock()
        self._buffer = b""
        if self._read(START_TIMEOUT_S) != {"ready": True}:
            self.close()
            raise ForkServerError("the node fork server did not start")

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def spawn(self, args: list[str], cwd: str, env: dict[str, str], log: str) -> ForkedNode:
        reply = self.request({"op": "spawn", "args": args, "cwd": cwd, "env": env, "log": log})
        return ForkedNode(self, reply["pid"])

    def request(self, message: dict, timeout: float = REPLY_TIMEOUT_S) -> dict:
        with self._lock:
            try:
                self._proc.stdin.write((json.dumps(message) + "\n").encode())
                self._proc.stdin.flush()
            except (BrokenPipeError, ValueError) as exc:
                raise ForkServerError(f"the node fork server is gone ({exc})") from None
            reply = self._read(timeout)
        if "error" in reply:
            raise ForkServerError(f"node fork server: {reply['error']}")
        return reply

    def _read(self, timeout: float) -> dict:
        """The next reply line, within ``timeout`` (a server that stops answering is killed: never a hang)."""
        out = self._proc.stdout.fileno()
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([out], [], [], timeout)
            chunk = os.read(out, 65536) if ready else b""
            if not chunk:
                self.close()
                raise ForkServerError("the node fork server " + ("closed its pipe" if ready else
                                                                 f"gave no answer in {timeout:g}s"))
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)

    def close(self) -> None:
        """Stop the server: the kernel then kills every node it forked (their parent-death signal)."""
        for pipe in (self._proc.stdin, self._proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        self._proc.kill()
        self._proc.wait()


_SERVERS: dict[tuple[int, str, str], ForkServer] = {}


def fork_server(env: dict[str, str], cwd: str) -> ForkServer | None:
    """This process's fork server for ``env`` (started now if none runs), or None where it cannot run: off
    Linux, or when it failed to start (the caller then starts an interpreter, as before)."""
    if not sys.platform.startswith("linux"):
        return None
    key = (os.getpid(), env.get("PYTHONPATH", ""), cwd)  # a forked harness process starts a server of its own
    server = _SERVERS.get(key)
    if server is not None and server.alive:
        return server
    try:
        server = ForkServer(env, cwd)
    except (OSError, ForkServerError):
        return None
    _SERVERS[key] = server
    return server


if __name__ == "__main__":
    serve()
