"""SIGKILL the node at random instants of a long random workload; after each restart every invariant holds."""

from __future__ import annotations

import json
import random
import tempfile
import threading
import time
from pathlib import Path

import grpc
import pytest
import yaml

from cci_conformance.backends.base import SessionConfig
from cci_conformance.backends.checks import check_cpu_manager_state, check_pod_resources, check_snapshot
from cci_conformance.backends.registry import get_backend
from cci_conformance.node.api import ClaimRef, ContainerSpec, PodSpec
from cci_conformance.node.cci_journal import read_cci_state
from cci_conformance.node.client import NodeClient
from cci_conformance.paths import PROFILES_DIR, REFERENCE_DRIVER_DIR
from cci_conformance.topology import library
from cci_conformance.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]
KILLS = 100


def crc32_ieee(data: bytes) -> int:
    """An independent bitwise CRC-32/IEEE (reflected, poly 0xEDB88320), not zlib's."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def random_pod(rng: random.Random, uid: str) -> PodSpec:
    kind = rng.choice(["cci", "cci", "cci-denied", "static", "static", "shared"])
    if kind.startswith("cci"):
        attrs = ["EXCLUSIVE", "CORE-SIBLING-DENIED"] if kind == "cci-denied" else ["EXCLUSIVE"]
        params = {"cores": [str(rng.choice([2, 4]))], "cpu attributes": [attrs]}
        return PodSpec("ns", f"p-{uid}", uid, (ContainerSpec("c", claim="cl"),), (ClaimRef("cl", f"cl-{uid}", params),))
    if kind == "static":
        q = str(rng.choice([1, 2, 3]))
        return PodSpec("ns", f"p-{uid}", uid, (ContainerSpec("c", q, q, "1Gi", "1Gi"), ContainerSpec("side", "100m")))
    return PodSpec("ns", f"p-{uid}", uid, (ContainerSpec("c", "250m"),))


def workload(client: NodeClient, rng: random.Random, live: list[str], counter: list[int], stop: threading.Event):
    """Random admissions, deletions and container stops until the node dies under it."""
    while not stop.is_set():
        try:
            roll = rng.random()
            if roll < 0.55 or not live:
                counter[0] += 1
                uid = f"u{counter[0]}"
                if client.create_pod(random_pod(rng, uid)).admitted:
                    live.append(uid)
            elif roll < 0.9:
                client.delete_pod(live.pop(rng.randrange(len(live))))
            else:
                client.stop_container(rng.choice(live), "c")
        except grpc.RpcError:
            return


def checksum_problems(files: dict[str, bytes]) -> list[str]:
    """The snapshot's Checksum and every whole journal line's CRC, under the independent CRC-32."""
    problems = []
    outer = json.loads(files["cci_manager_state"])
    if crc32_ieee(outer["Data"].encode()) != outer["Checksum"]:
        problems.append("cci_manager_state checksum does not verify")
    for number, line in enumerate(files.get("cci_manager_state.journal", b"").split(b"\n")[:-1], 1):
        crc, _, text = line.partition(b" ")
        if int(crc, 16) != crc32_ieee(text):
            problems.append(f"cci_manager_state.journal line {number}: CRC-32 does not verify")
    return problems


def check_all(s) -> list[str]:
    snap = s.snapshot()
    files = s.state_files()
    problems = check_snapshot(snap)
    problems += check_cpu_manager_state(files["cpu_manager_state"], snap, "static")
    problems += check_pod_resources(s.listed_exclusive_cpus(), s.allocatable_cpus(), snap)
    problems += checksum_problems(files)
    records = {f"{r['podUID']}/{r['container']}" for r in read_cci_state(files)["containers"]}
    if records != {f"{c.pod_uid}/{c.container}" for c in snap.containers}:
        problems.append("cci_manager_state containers differ from the snapshot")
    return problems


def driver_lost_nothing(s, tag: str) -> None:
    """Once the owed Removes are sent, the driver grants every free CPU: nothing leaked on its side."""
    wait_for(lambda: not s.snapshot().pending, 10, what="owed CCIRemove calls to be delivered")
    snap = s.snapshot()
    held = frozenset().union(*snap.exclusive.values())
    free = snap.online - snap.reserved - held
    n = len(free)
    params = {"cores": [str(n)], "cpu attributes": [["EXCLUSIVE"]]}
    pod = PodSpec("ns", f"probe-{tag}", f"probe-{tag}", (ContainerSpec("c", claim="cl"),),
                  (ClaimRef("cl", f"probe-{tag}", params),))
    r = s.create_pod(pod)
    assert r.admitted and r.containers[0].cpus == free, (r.reason, r.message)
    s.delete_pod(pod.uid)


def test_sigkill_storm():
    workdir = Path(tempfile.mkdtemp(prefix="cci-", dir="/tmp"))
    profile = yaml.safe_load((PROFILES_DIR / "node" / "coexistence.yaml").read_text())
    s = get_backend("embedded").open(SessionConfig(library.load("server-2s-snc4"), profile,
                                                   REFERENCE_DRIVER_DIR / "driver.yaml", workdir))
    rng = random.Random(20261129)
    live: list[str] = []
    counter = [0]
    journal_lines = 0
    started = time.monotonic()
    try:
        for kill in range(KILLS):
            client = NodeClient(s.kubelet / "node-control.sock", timeout=5)
            stop = threading.Event()
            worker = threading.Thread(target=workload, args=(client, random.Random(kill), live, counter, stop))
            worker.start()
            time.sleep(rng.uniform(0.0, 0.1))  # the random instant of the kill, not a wait for anything
            s.stop_node(hard=True)
            stop.set()
            worker.join(10)
            client.close()
            left = s.state_files()  # as the kill left them: the journal usually holds records here
            journal_lines += left.get("cci_manager_state.journal", b"").count(b"\n")
            assert not checksum_problems(left), f"after kill {kill + 1}: {checksum_problems(left)}"
            s.start_node()
            problems = check_all(s)
            assert not problems, f"after kill {kill + 1}: {problems}"
            if kill % 25 == 24:
                driver_lost_nothing(s, str(kill))
        driver_lost_nothing(s, "end")
        assert counter[0] > KILLS, "the workload barely ran"
        assert journal_lines > KILLS, "the kills did not catch the node with a journal to replay"
    finally:
        elapsed = time.monotonic() - started
        s.close()
    print(f"{KILLS} kills, {counter[0]} pods attempted, {journal_lines} journal records replayed at restarts, "
          f"in {elapsed:.1f}s")
