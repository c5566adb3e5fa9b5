"""Run a manifest's ``local.build`` once per run, before its driver's first start, with a deadline and a log."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import ConfigError
from ..procgroup import running, stop_group
from ..waiting import WaitTimeout, wait_for
from .manifest import DriverManifest

BUILD_LOG = "build.log"
LOG_TAIL_LINES = 30
# Waiting for another process's build of the same manifest: its own deadline plus time to write its stamp.
LOCK_SLACK_S = 30.0


class BuildError(ConfigError):
    """``local.build`` failed or timed out; names the manifest, the field and the build log."""


@dataclass
class BuildResult:
    run: str
    ok: bool
    problem: str
    argv: list[str]
    seconds: float
    log_text: str
    manifest: str = ""  # the manifest this stamp is for: a stamp outliving its folder is removed (_prune_stamps)


_memo: dict[str, BuildResult] = {}
_PROCESS_RUN = f"process-{uuid.uuid4().hex}"  # when /proc cannot tell a process's start time
RUN_ID_ENV = "CCI_BUILD_RUN_ID"  # set it to share one build between processes of your own
_memo_lock = threading.Lock()


def resolve_executable(exe: str, folder: Path) -> str | None:
    """argv[0] as the manifest means it: a path (relative to the manifest folder) or a name on PATH."""
    if "/" in exe:
        path = Path(exe) if os.path.isabs(exe) else folder / exe
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    return shutil.which(exe)


def _process_key(pid: int) -> str:
    """pid and start time: unique over the machine's uptime, unlike a pid alone (pids are reused)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f"{pid}-{f.read().rsplit(')', 1)[1].split()[19]}"
    except (OSError, IndexError):
        return _PROCESS_RUN if pid == os.getpid() else f"{pid}-unknown"


def run_id() -> str:
    """One id per run: the pytest process's. An xdist worker is a child of the controller, which runs
    the startup probe (certify/probe.py), so controller and workers build once between them."""
    if os.environ.get(RUN_ID_ENV):
        return os.environ[RUN_ID_ENV]
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return "run-" + _process_key(os.getppid())
    return "run-" + _process_key(os.getpid())


def _stamp_prefix() -> str:
    return f"cci-build-{os.getuid()}-"


def _stamp_paths(manifest: DriverManifest) -> tuple[Path, Path]:
    key = hashlib.sha256(str(manifest.path).encode()).hexdigest()[:16]
    base = Path(tempfile.gettempdir()) / f"{_stamp_prefix()}{key}"
    return base.with_suffix(".lock"), base.with_suffix(".json")


def _prune_stamps() -> None:
    """Remove the stamps (and locks) of manifests that no longer exist: a driver folder made for one test or
    one run leaves its stamp in the temp dir, which would otherwise grow by a pair per folder for ever."""
    for stamp in Path(tempfile.gettempdir()).glob(f"{_stamp_prefix()}*.json"):
        try:
            owner = json.loads(stamp.read_text()).get("manifest", "")
        except (OSError, ValueError, AttributeError):
            continue  # being written by another process, or not ours to judge
        if owner and not Path(owner).exists():
            stamp.unlink(missing_ok=True)
            stamp.with_suffix(".lock").unlink(missing_ok=True)


def build_driver(manifest: DriverManifest, log_dir: Path | str) -> BuildResult | None:
    """Build the driver unless this run already did; raise BuildError if that build failed.

    Every caller writes ``log_dir/build.log``, so each session's logs say how its binary was made.
    xdist workers of one run share one build: a file lock serialises them and a stamp records the result.
    """
    if not manifest.build:
        return None
    log_path = Path(log_dir) / BUILD_LOG
    with _memo_lock:
        result = _memo.get(str(manifest.path))
        if result is None or result.run != run_id():
            result = _shared_build(manifest, log_path)
            _memo[str(manifest.path)] = result
        else:
            _write_log(log_path, result, reused=True)
    if not result.ok:
        # The output first: a run's one STOPPED line is cut short (certify/probe.py), the log path is not news.
        raise BuildError(f"{result.problem}: {_tail(result.log_text)}\n(build log {log_path})",
                         file=str(manifest.path), field="local.build",
                         fix="make the build command succeed in the manifest folder, or raise "
                             "local.build_timeout_s")
    return result


def _shared_build(manifest: DriverManifest, log_path: Path) -> BuildResult:
    lock_path, stamp_path = _stamp_paths(manifest)
    with open(lock_path, "a") as lock:
        def locked() -> bool:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                return False

        try:
            wait_for(locked, manifest.build_timeout_s + LOCK_SLACK_S, interval=0.1,
                     what=f"the build lock {lock_path}")
        except WaitTimeout as exc:
            return BuildResult(run_id(), False, f"another process held the build lock too long: {exc}",
                               manifest.build_argv(), 0.0, "")
        try:
            try:
                stamp = BuildResult(**json.loads(stamp_path.read_text()))
            except (OSError, ValueError, TypeError):
                stamp = None
            if stamp is not None and stamp.run == run_id():
                _write_log(log_path, stamp, reused=True)
                return stamp
            result = _run_build(manifest, log_path)
            stamp_path.write_text(json.dumps(asdict(result)))
            _prune_stamps()
            return result
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run_build(manifest: DriverManifest, log_path: Path) -> BuildResult:
    argv = manifest.build_argv()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    if resolve_executable(argv[0], manifest.folder) is None:
        problem = f"build command {argv[0]!r} not found or not executable (local.build[0])"
        log_path.write_text(problem + "\n")
        return BuildResult(run_id(), False, problem, argv, 0.0, problem + "\n", str(manifest.path))
    started = time.monotonic()
    with open(log_path, "wb") as log:
        log.write(f"--- build in {manifest.folder}: {' '.join(argv)}\n".encode())
        log.flush()
        # Own process group: a timeout kills the compiler's children too, not only the front-end.
        proc = subprocess.Popen(argv, cwd=manifest.folder, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for(lambda: not running(proc), manifest.build_timeout_s, interval=0.05,
                     what=f"local.build of {manifest.name}")
            timed_out = False
        except WaitTimeout:
            timed_out = True
        code = stop_group(proc)  # also whatever the build left running in its group
    seconds = time.monotonic() - started
    text = log_path.read_text(errors="replace")
    if timed_out:
        problem = f"build did not finish within local.build_timeout_s={manifest.build_timeout_s:g} s and was killed"
    elif code != 0:
        problem = f"`{' '.join(manifest.build)}` exited with code {code} after {seconds:.1f} s"
    else:
        problem = ""
    return BuildResult(run_id(), not problem, problem, argv, seconds, text, str(manifest.path))


def _write_log(log_path: Path, result: BuildResult, reused: bool) -> None:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    note = f"--- this run built the driver once ({result.seconds:.1f} s); that build's log follows\n" if reused else ""
    log_path.write_text(note + result.log_text)


def _tail(text: str) -> str:
    """The build's last output lines, without the harness's own ``---`` header lines."""
    lines = [line for line in text.splitlines() if not line.startswith("--- ")]
    return "\n".join(lines[-LOG_TAIL_LINES:]) or "(no output)"
