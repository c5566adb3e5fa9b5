"""The reference driver's life as a process: registration, kill -9 and restart, SIGTERM, bad starts."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from cci_conformance.cpuset import parse_cpulist
from cci_conformance.drivers.client import LocalDriver
from cci_conformance.drivers.manifest import load_manifest
from cci_conformance.drivers.process import DriverError, DriverProcess, get_info
from cci_conformance.errors import ConfigError
from cci_conformance.paths import REFERENCE_DRIVER_DIR
from cci_conformance.topology import library
from cci_conformance.waiting import wait_for

pytestmark = pytest.mark.integration

MANIFEST = load_manifest(REFERENCE_DRIVER_DIR)
TOPOLOGY = library.load("server-2s8c-smt2-intel")  # 32 CPUs


def exclusive(n):
    return {"cores": [str(n)], "cpu attributes": [["EXCLUSIVE"]]}


@pytest.fixture
def driver():
    with LocalDriver(MANIFEST, TOPOLOGY) as d:
        yield d


def test_registers_with_the_documented_plugin_info(driver):
    info = get_info(driver.process.registration_socket)
    assert info.type == "CCIPlugin" and info.name == "reference" and list(info.supported_versions) == ["v1alpha1"]
    assert info.endpoint == str(driver.root / "kubelet" / "plugins" / "reference" / "cci.sock")
    assert driver.process.registration_socket == driver.root / "kubelet/plugins_registry/reference-reg.sock"


def test_kill_9_and_restart_keeps_every_grant(driver):
    c = driver.client
    held: dict[str, frozenset[int]] = {}
    for i in range(4):
        reply = c.admit(pod=f"p{i}", container="main", claim_uid=f"u{i}", claim=exclusive(4),
                        available=TOPOLOGY.online_cpus - frozenset().union(*held.values()))
        assert reply.err == ""
        held[f"u{i}"] = parse_cpulist(reply.rSet.cpuset)
        if i < 3:  # p3 is admitted but never added when the driver dies
            assert c.add(pod=f"p{i}", container="main", container_id=f"cid{i}").err == ""
    pid = driver.process.pid
    driver.restart(hard=True)
    assert driver.process.pid != pid and driver.process.alive
    c = driver.client
    # idempotent admit after the restart returns the same CPUs
    for i in range(4):
        again = c.admit(pod=f"p{i}", container="main", claim_uid=f"u{i}", claim=exclusive(4),
                        available=TOPOLOGY.online_cpus)
        assert parse_cpulist(again.rSet.cpuset) == held[f"u{i}"]
    # nothing double-granted: even offered every CPU, the driver keeps the 16 held ones out
    fresh = c.admit(pod="p9", container="main", claim_uid="u9", claim=exclusive(16), available=TOPOLOGY.online_cpus)
    assert fresh.err == ""
    assert parse_cpulist(fresh.rSet.cpuset).isdisjoint(frozenset().union(*held.values()))
    assert c.admit(pod="p10", container="main", claim_uid="u10", claim=exclusive(1),
                   available=TOPOLOGY.online_cpus).err != ""
    # nothing lost: remove everything (added ones by id, the un-added one by claim) and get all 32 back
    for i in range(3):
        assert c.remove(claim_uid=f"u{i}", container_id=f"cid{i}").err == ""
    assert c.remove(claim_uid="u3", container_id="").err == ""
    assert c.remove(claim_uid="u9", container_id="").err == ""
    whole = c.admit(pod="p11", container="main", claim_uid="u11", claim=exclusive(32), available=TOPOLOGY.online_cpus)
    assert parse_cpulist(whole.rSet.cpuset) == TOPOLOGY.online_cpus


def test_kill_9_mid_sequence_many_times(driver):
    """Repeated crashes: the state file is always whole (atomic writes) and the grants survive."""
    granted = frozenset()
    for i in range(3):
        reply = driver.client.admit(pod=f"p{i}", container="c", claim_uid=f"u{i}", claim=exclusive(2),
                                    available=TOPOLOGY.online_cpus - granted)
        got = parse_cpulist(reply.rSet.cpuset)
        assert got.isdisjoint(granted)
        granted |= got
        driver.restart(hard=True)
    state_files = sorted(os.listdir(driver.root / "driver-state"))
    assert state_files == ["driver_state.journal"]  # three changes: three journal records, no snapshot yet


def test_sigterm_removes_both_sockets_and_exits_0(driver):
    reg, cci = driver.process.registration_socket, driver.root / "kubelet/plugins/reference/cci.sock"
    assert reg.exists() and cci.exists()
    assert driver.process.terminate() == 0
    assert not reg.exists() and not cci.exists()
    assert '"event":"stopped"' in (driver.root / "logs/driver.log").read_text()


def test_corrupt_state_refuses_to_start(driver):
    driver.client.admit(pod="p", container="c", claim_uid="u", claim=exclusive(2), available=TOPOLOGY.online_cpus)
    driver.process.kill()
    state = driver.root / "driver-state" / "driver_state.journal"  # the first change is the journal's first record
    state.write_text(state.read_text().replace('"exclusive":true', '"exclusive":false'))
    driver.process.start()
    with pytest.raises(DriverError, match="exited with code 1 before registering"):
        driver.process.wait_registered(10)
    assert "state_corrupt" in (driver.root / "logs/driver.log").read_text()


# ---- bad starts, with small manifests of their own ----
@pytest.fixture
def scratch():
    root = Path(tempfile.mkdtemp(prefix="cci-", dir="/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def manifest(root: Path, command: list[str], timeout: float = 1.0):
    text = f"""\
    name: probe
    protocol: cci/v1alpha1
    capabilities: []
    local:
      command: {command!r}
    startup_timeout_s: {timeout}
    """
    (root / "driver.yaml").write_text(textwrap.dedent(text))
    return load_manifest(root)


def process(root: Path, m) -> DriverProcess:
    return DriverProcess(m, root / "reg", root / "plugins", root / "sys", root / "state", root / "log" / "d.log")


def test_missing_command_is_a_config_error(scratch):
    p = process(scratch, manifest(scratch, ["no-such-driver-binary", "{state_dir}"]))
    with pytest.raises(ConfigError) as err:
        p.start()
    assert err.value.field == "local.command[0]" and "no-such-driver-binary" in err.value.problem


def test_driver_that_never_registers_fails_within_its_timeout(scratch):
    p = process(scratch, manifest(scratch, [sys.executable, "-c", "import time; time.sleep(30)"], timeout=1.0))
    p.start()
    start = time.monotonic()
    with pytest.raises(DriverError, match="did not register within 1.0s"):
        p.wait_registered()
    assert time.monotonic() - start < 3
    p.kill()
    assert not p.alive


def test_driver_that_exits_early_is_reported_at_once(scratch):
    code = "import sys; print('bad flag', file=sys.stderr); sys.exit(3)"
    p = process(scratch, manifest(scratch, [sys.executable, "-c", code], timeout=20))
    p.start()
    start = time.monotonic()
    with pytest.raises(DriverError, match="exited with code 3") as err:
        p.wait_registered()
    assert "bad flag" in str(err.value) and time.monotonic() - start < 5


def test_no_child_survives_terminate(scratch):
    code = ("import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
            "open('child.pid', 'w').write(str(c.pid)); signal = __import__('signal');"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)")
    p = process(scratch, manifest(scratch, [sys.executable, "-c", code]))
    p.start()
    pid_file = scratch / "child.pid"
    child = int(wait_for(lambda: pid_file.exists() and pid_file.read_text(), 10, what="child pid file"))
    assert p.terminate(timeout=0.5) == -9  # ignored SIGTERM, so SIGKILL

    def gone():
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return True
        return Path(f"/proc/{child}/stat").read_text().split()[2] == "Z"  # reaped soon by init

    wait_for(gone, 5, what="the driver's child to die")
