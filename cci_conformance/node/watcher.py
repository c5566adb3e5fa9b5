"""The plugin watcher: polls ``<root>/plugins_registry``, registers CCI drivers, notices them leave and come back."""

from __future__ import annotations

import logging
import os
import re
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from ..protocol.protos import cci_v1alpha1_pb2_grpc as cci_grpc
from ..protocol.protos import pluginregistration_pb2 as reg_pb2
from ..protocol.protos import pluginregistration_pb2_grpc as reg_grpc

PLUGIN_TYPE = "CCIPlugin"  # docs/spec.md §1: the type a CCI driver advertises in PluginInfo
SUPPORTED_VERSION = "v1alpha1"
log = logging.getLogger("cci.node.watcher")
# The node log's record of an accepted registration: the backend reads the endpoint the driver advertised from it
# (registered_endpoint), as the kind backend reads the kubelet's journal.
REGISTERED_LOG = "driver %s registered (endpoint %s)"


def registered_endpoint(node_log: str, driver: str) -> str | None:
    """The endpoint of the last registration of ``driver`` the node log records (the PluginInfo endpoint it
    advertised and the watcher opened its channel to), or None when the node accepted none."""
    pattern = re.compile(r"\b" + re.escape(REGISTERED_LOG % (driver, "@@")).replace("@@", "(.*)") + "$")
    found = None
    for line in node_log.splitlines():
        if match := pattern.search(line):
            found = match.group(1)
    return found


@dataclass
class DriverConn:
    """A registered CCI driver: its name, service socket and a channel kept open across calls."""

    name: str
    endpoint: str
    registration_socket: str
    channel: grpc.Channel = field(repr=False)
    stub: cci_grpc.CCIDriverStub = field(repr=False)

    def close(self) -> None:
        self.channel.close()


def validate_info(info: reg_pb2.PluginInfo, plugins_dir: Path) -> str:
    """The reason a PluginInfo is refused, or "" when it is acceptable (DESIGN §2.3)."""
    if info.type != PLUGIN_TYPE:
        return f"unsupported plugin type {info.type!r}: this node handles {PLUGIN_TYPE!r}"
    if not info.name or "/" in info.name or info.name.startswith("."):
        return f"invalid driver name {info.name!r}"
    if SUPPORTED_VERSION not in info.supported_versions:
        return f"none of the supported versions {list(info.supported_versions)} is {SUPPORTED_VERSION!r}"
    endpoint = Path(info.endpoint)
    if not endpoint.is_absolute() or not str(endpoint).startswith(str(plugins_dir) + os.sep):
        return f"endpoint {info.endpoint!r} is not a socket under {str(plugins_dir)!r}"
    try:
        if not stat.S_ISSOCK(os.stat(endpoint).st_mode):
            return f"endpoint {info.endpoint!r} is not a unix socket"
    except OSError:
        return f"endpoint {info.endpoint!r} does not exist"
    return ""


class PluginWatcher:
    """Polls the registry directory (interval ``poll_s``); every RPC it makes has a deadline."""

    def __init__(self, registry_dir: Path, plugins_dir: Path, poll_s: float, rpc_timeout_s: float,
                 on_register: Callable[[str], None] | None = None):
        self.registry_dir = Path(registry_dir)
        self.plugins_dir = Path(plugins_dir)
        self.poll_s = poll_s
        self.rpc_timeout_s = rpc_timeout_s
        self.on_register = on_register
        self.drivers: dict[str, DriverConn] = {}
        self.refused: dict[str, str] = {}  # registration socket -> reason
        self.registrations = 0  # successful registrations since start (a restarted driver counts again)
        self._seen: dict[str, Ident] = {}  # socket -> the identity of the file that answered
        self._retry_at: dict[str, float] = {}
        self._retired: list[tuple[float, DriverConn]] = []  # (close after, connection) replaced by a re-registration
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="plugin-watcher", daemon=True)

    def start(self) -> None:
        self.registry_dir.mkdir(parents=True, exist_ok=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        with self._lock:
            for conn in [*self.drivers.values(), *(conn for _, conn in self._retired)]:
                conn.close()
            self.drivers.clear()
            self._retired.clear()

    def get(self, name: str) -> DriverConn | None:
        with self._lock:
            return self.drivers.get(name)

    def names(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(sorted(self.drivers))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll_once()
            except Exception:  # the watcher must outlive any single bad plugin
                log.exception("plugin watcher poll failed")
            self._stop.wait(self.poll_s)

    def poll_once(self) -> None:
        self._close_retired()
        present: dict[str, Ident] = {}
        try:
            entries = list(os.scandir(self.registry_dir))
        except OSError:
            entries = []
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISSOCK(st.st_mode):
                present[entry.path] = _ident(st)
        for path in list(self._seen):
            if path not in present:
                self._forget(path)
            elif present[path] != self._seen[path]:
                # Re-created (a restarted driver) or touched: ask it again, but keep the driver registered
                # until that fails: an admission between two polls must not see a gap (docs/spec.md S3.8).
                del self._seen[path]
                self.refused.pop(path, None)
                self._retry_at.pop(path, None)
        now = time.monotonic()
        for path in present:
            if path in self._seen or self._retry_at.get(path, 0.0) > now:
                continue
            ident = self._register(path)
            if ident is not None:
                self._seen[path] = ident
                self._retry_at.pop(path, None)
            else:  # not answering (yet): whatever it registered is gone; retry soon, backing off up to 1 s
                self._forget(path)
                self._retry_at[path] = now + min(1.0, self.poll_s * 4)

    def _forget(self, path: str) -> None:
        """The socket went away, or its replacement does not answer: deregister whatever it registered."""
        self._seen.pop(path, None)
        self.refused.pop(path, None)
        self._drop_registered_by(path)

    def _register(self, path: str) -> Ident | None:
        """GetInfo + validate + NotifyRegistrationStatus; the identity of the socket that answered, or None.

        The socket is stat'ed right before dialling and again after the answer: only when both agree do we
        know which file answered. Taking the identity from the directory scan instead recorded a stale
        socket's identity when a restarting driver replaced it between the scan and GetInfo, and the next
        poll then saw a "change" and deregistered a driver that was serving (the flake of issue 12).
        """
        before = _stat_ident(path)
        if before is None:
            return None
        try:
            with grpc.insecure_channel(f"unix:{path}") as channel:
                stub = reg_grpc.RegistrationStub(channel)
                info = stub.GetInfo(reg_pb2.InfoRequest(), timeout=self.rpc_timeout_s)
                if _stat_ident(path) != before:
                    log.info("registration socket %s was replaced while asked; will ask again", path)
                    return None
                reason = validate_info(info, self.plugins_dir)
                try:
                    stub.NotifyRegistrationStatus(
                        reg_pb2.RegistrationStatus(plugin_registered=not reason, error=reason),
                        timeout=self.rpc_timeout_s)
                except grpc.RpcError as exc:  # the kubelet logs and goes on; so do we
                    log.warning("NotifyRegistrationStatus to %s failed: %s", path, exc.code())
        except grpc.RpcError as exc:
            log.info("GetInfo on %s failed (%s); will retry", path, exc.code())
            return None
        if reason:
            log.warning("refused plugin at %s: %s", path, reason)
            self.refused[path] = reason
            self._drop_registered_by(path)
            return before
        # A driver restarts behind the same endpoint: reconnect quickly instead of gRPC's 1 s+ backoff, and on
        # a subchannel of this channel's own: gRPC otherwise shares one per target with the replaced channel,
        # whose connection may still be in backoff from the driver that died.
        channel = grpc.insecure_channel(f"unix:{info.endpoint}", options=[
            ("grpc.initial_reconnect_backoff_ms", 20), ("grpc.min_reconnect_backoff_ms", 20),
            ("grpc.max_reconnect_backoff_ms", 200), ("grpc.use_local_subchannel_pool", 1)])
        conn = DriverConn(info.name, info.endpoint, path, channel, cci_grpc.CCIDriverStub(channel))
        with self._lock:
            old = self.drivers.get(info.name)
            self.drivers[info.name] = conn
            if old is not None:
                # A fresh channel serves the next call at once (the old one may sit in reconnect backoff after
                # the driver was down); the old one closes once any call still on it has met its deadline.
                self._retired.append((time.monotonic() + self.rpc_timeout_s + 1.0, old))
        log.info(REGISTERED_LOG, info.name, info.endpoint)
        if self.on_register is not None:
            self.on_register(info.name)  # owed Removes first, so a caller seeing the count sees them delivered
        with self._lock:
            self.registrations += 1
        return before

    def _close_retired(self) -> None:
        now = time.monotonic()
        with self._lock:
            due = [conn for when, conn in self._retired if when <= now]
            self._retired = [(when, conn) for when, conn in self._retired if when > now]
        for conn in due:
            conn.close()

    def _drop_registered_by(self, path: str) -> None:
        with self._lock:
            for name, conn in list(self.drivers.items()):
                if conn.registration_socket == path:
                    log.info("driver %s deregistered: registration socket %s went away or no longer answers",
                             name, path)
                    conn.close()
                    del self.drivers[name]


Ident = tuple[int, int, int]


def _ident(st: os.stat_result) -> Ident:
    """What tells one socket file from its replacement: inode, mtime and ctime."""
    return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def _stat_ident(path: str) -> Ident | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return _ident(st) if stat.S_ISSOCK(st.st_mode) else None
