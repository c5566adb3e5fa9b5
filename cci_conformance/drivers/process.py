"""Start, watch, restart and stop one driver process from its manifest (no shell, own process group)."""

from __future__ import annotations

import os
import subprocess
import weakref
from pathlib import Path

import grpc

from ..errors import ConfigError
from ..paths import INSTALLED, PROJECT_ROOT
from ..procgroup import exit_status, running, signal_group, stop_group, with_parent_death
from ..protocol.protos import pluginregistration_pb2 as reg_pb2
from ..protocol.protos import pluginregistration_pb2_grpc as reg_grpc
from ..waiting import WaitTimeout, wait_for
from .build import build_driver, resolve_executable
from .manifest import DriverManifest

GETINFO_DEADLINE_S = 1.0


class DriverError(RuntimeError):
    """The driver process misbehaved: it exited early or did not register in time."""


def registration_socket(registry_dir: Path | str, driver_name: str) -> Path:
    """Where a driver puts its plugin-watcher socket (docs/spec.md S1.2)."""
    return Path(registry_dir) / f"{driver_name}-reg.sock"


def get_info(socket_path: Path | str, timeout: float = GETINFO_DEADLINE_S) -> reg_pb2.PluginInfo:
    """Dial a registration socket and call GetInfo with a deadline."""
    with grpc.insecure_channel(f"unix:{socket_path}") as channel:
        return reg_grpc.RegistrationStub(channel).GetInfo(reg_pb2.InfoRequest(), timeout=timeout)


class DriverProcess:
    """One driver under test, started from its manifest; every stop also kills its whole process group."""

    def __init__(self, manifest: DriverManifest, registry_dir: Path | str, plugin_dir: Path | str,
                 sysfs_root: Path | str, state_dir: Path | str, log_path: Path | str,
                 driver_name: str | None = None, extra_env: dict[str, str] | None = None):
        self.manifest = manifest
        self.driver_name = driver_name or manifest.name
        self.registry_dir = Path(registry_dir)
        self.plugin_dir = Path(plugin_dir)
        self.sysfs_root = Path(sysfs_root)
        self.state_dir = Path(state_dir)
        self.log_path = Path(log_path)
        self.extra_env = dict(extra_env or {})
        self._proc: subprocess.Popen | None = None
        self._finalizer: weakref.finalize | None = None

    # ---- observation ----
    @property
    def registration_socket(self) -> Path:
        return registration_socket(self.registry_dir, self.driver_name)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def alive(self) -> bool:
        return running(self._proc)  # never reaps: the group stays safe to signal (procgroup.py)

    @property
    def exit_code(self) -> int | None:
        """None while running (or never started); negative = killed by that signal."""
        return exit_status(self._proc)

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the driver's process group (e.g. SIGSTOP/SIGCONT), if it has not been reaped."""
        signal_group(self._proc, sig)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    # ---- lifecycle ----
    def argv(self) -> list[str]:
        argv = self.manifest.argv(registry_dir=self.registry_dir, plugin_dir=self.plugin_dir,
                                  sysfs_root=self.sysfs_root, state_dir=self.state_dir, driver_name=self.driver_name)
        exe = argv[0]
        if not resolve_executable(exe, self.manifest.folder):
            raise ConfigError(f"command {exe!r} not found or not executable", file=str(self.manifest.path),
                              field="local.command[0]",
                              fix="give an executable on PATH, a path relative to the manifest folder, or {python}")
        return argv

    def start(self) -> None:
        """Start the driver (its folders are created; ``local.build`` first, once per run); does not wait
        for registration."""
        if self.alive:
            raise DriverError(f"driver {self.driver_name} is already running (pid {self.pid})")
        stop_group(self._proc)  # an exited one: its leftover children go, its zombie is reaped
        # Here rather than in each opener: every way of starting a driver (embedded backend, LocalDriver,
        # `driver start`) gets the build, and build_driver runs it once per run (docs/spec.md S1.10).
        build_driver(self.manifest, self.log_path.parent)
        argv = self.argv()
        for sock in (self.registration_socket, self.plugin_dir / "cci.sock"):
            if len(str(sock).encode()) > 107:
                raise DriverError(f"socket path {sock} is longer than 107 bytes; make the session directory with "
                                  "tempfile.mkdtemp(prefix='cci-', dir='/tmp')")
        for d in (self.registry_dir, self.plugin_dir, self.state_dir, self.log_path.parent):
            d.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        if not INSTALLED:  # from a source tree, an SDK driver must import this same package; installed, it
            # imports the installed one and the site-packages dir stays off PYTHONPATH.
            env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
        env.update(self.manifest.environment(registry_dir=self.registry_dir, plugin_dir=self.plugin_dir,
                                             sysfs_root=self.sysfs_root, state_dir=self.state_dir,
                                             driver_name=self.driver_name))
        env.update(self.extra_env)
        with open(self.log_path, "ab") as log:
            log.write(f"--- start {' '.join(argv)}\n".encode())
            log.flush()
            # the driver dies with the process that started it, even a SIGKILLed one (procgroup.with_parent_death)
            command, preexec = with_parent_death(argv)
            self._proc = subprocess.Popen(command, cwd=self.manifest.folder, stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                          preexec_fn=preexec)
        if self._finalizer is not None:
            self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _finalize, self._proc)

    def wait_registered(self, timeout: float | None = None) -> reg_pb2.PluginInfo:
        """Wait until the registration socket exists and answers GetInfo; return its PluginInfo."""
        timeout = self.manifest.startup_timeout_s if timeout is None else timeout
        sock = self.registration_socket

        exited = object()

        def registered():
            if not running(self._proc):
                return exited
            if not sock.exists():
                return None
            return get_info(sock, timeout=min(GETINFO_DEADLINE_S, timeout))

        try:
            info = wait_for(registered, timeout, interval=0.02, what=f"GetInfo on {sock}")
        except WaitTimeout as exc:
            raise DriverError(f"driver {self.driver_name} did not register within {timeout:.1f}s "
                              f"(startup_timeout_s of {self.manifest.path}): {exc}; log {self.log_path}:\n"
                              f"{self.log_tail()}") from None
        if info is exited:
            raise DriverError(f"driver {self.driver_name} exited with code {self.exit_code} before registering; "
                              f"log {self.log_path}:\n{self.log_tail()}")
        return info

    def terminate(self, timeout: float = 5.0) -> int | None:
        """SIGTERM the process group, then SIGKILL whatever is left after ``timeout``; return the exit code."""
        return stop_group(self._proc, grace_s=timeout)

    def kill(self) -> int | None:
        """SIGKILL the process group at once (a crash, as kill -9 gives); return the exit code."""
        return stop_group(self._proc)

    def restart(self, hard: bool = True, timeout: float | None = None) -> reg_pb2.PluginInfo:
        """Stop (kill -9 when ``hard``, else SIGTERM), start again and wait for registration."""
        if hard:
            self.kill()
        else:
            self.terminate()
        self.start()
        return self.wait_registered(timeout)

    def close(self) -> None:
        self.terminate()

    def __enter__(self) -> DriverProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _finalize(proc: subprocess.Popen) -> None:
    """Garbage-collected or interpreter exit: never leave a driver (or its children) running."""
    stop_group(proc)
