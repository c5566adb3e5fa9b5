"""The node's store invariants and its two checkpoint files (formats, checksums, corruption, crash pairs)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from cci_conformance.cpu_manager_state import checksum, spew_for_hash
from cci_conformance.cpuset import parse_cpulist
from cci_conformance.node.checkpoint import CheckpointError, canonical, decode, encode
from cci_conformance.node.profile import parse_config
from cci_conformance.node.state_files import StateFiles
from cci_conformance.node.store import CCI, SHARED, STATIC, Record, Store, StoreInvariantError

ONLINE = frozenset(range(16))


def crc32_ieee(data: bytes) -> int:
    """Independent bitwise CRC-32/IEEE (reflected polynomial 0xEDB88320)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def rec(uid: str, source: str = STATIC, cpus: str = "", withheld: str = "", shared: str = "", name: str = "c"):
    return Record(uid, name, "ns", f"pod-{uid}", f"id-{uid}-{name}", source, exclusive=parse_cpulist(cpus),
                  withheld=parse_cpulist(withheld), shared_cpus=parse_cpulist(shared))


@pytest.fixture
def root():
    d = Path(tempfile.mkdtemp(prefix="cci-", dir="/tmp"))
    yield d
    shutil.rmtree(d)


def config(mode="coexistence", **extra):
    data = {"mode": mode, "reservedSystemCPUs": "0"}
    data.update(extra)
    return parse_config(data)


def test_design_vector_and_dra_vector():
    text = spew_for_hash("static", "0,2-12,14-23", {"235148fe-393f-47a8-a17d-bd55bc1a836b": {"cgroup1-0": "1,13"}})
    assert checksum("static", "0,2-12,14-23",
                    {"235148fe-393f-47a8-a17d-bd55bc1a836b": {"cgroup1-0": "1,13"}}) == 1552716370, text
    assert checksum("static", "0-1", {}) == 1636926438  # a real kubelet file, also quoted in talos PR #7557
    # the same CRC-32/IEEE as dra_manager_state (kubelet-and-sysfs.md §3 vector), independently computed
    dra = b'{"kind":"DRACheckpoint","apiVersion":"checkpoint.dra.kubelet.k8s.io/v1","ClaimInfoStateList":[]}'
    assert crc32_ieee(dra) == 2361995144
    raw = encode(dra.decode())
    assert json.loads(raw)["Checksum"] == 2361995144


def test_store_pools_and_invariants():
    s = Store(ONLINE, frozenset({0}), strict_reservation=False)
    s.add(rec("a", STATIC, "2-3"))
    s.add(rec("b", CCI, "4", withheld="5"))
    s.add(rec("c", SHARED))
    s.add(rec("d", CCI, shared="6-9"))
    assert s.available() == ONLINE - {0, 2, 3, 4, 5}
    assert s.shared_pool == ONLINE - {2, 3, 4, 5}  # reserved stays in the pool unless strict
    assert s.effective(s.records[("b", "c")]) == {4}  # withheld siblings are not run on
    assert s.effective(s.records[("d", "c")]) == {6, 7, 8, 9}
    s.add(rec("e", STATIC, "6-7"))  # an exclusive grant wins over a SHARED group
    assert s.effective(s.records[("d", "c")]) == {8, 9}
    s.check()
    with pytest.raises(StoreInvariantError):
        s.add(rec("f", STATIC, "3"))
    with pytest.raises(StoreInvariantError, match="runtime cpuset"):
        s.check({k: s.effective(r) for k, r in s.records.items()} | {("a", "c"): frozenset({2})})
    strict = Store(ONLINE, frozenset({0}), strict_reservation=True)
    assert 0 not in strict.shared_pool
    bad = Store(ONLINE, frozenset({0}), strict_reservation=False)
    with pytest.raises(StoreInvariantError, match="reserved"):
        bad.add(rec("r", STATIC, "0"))  # refused on the way in: the store never holds it
    assert not bad.records
    bad.records[("r", "c")] = rec("r", STATIC, "0")  # as if a bug put it there behind add()
    bad._held = frozenset({0})
    with pytest.raises(StoreInvariantError, match="reserved"):
        bad.check()


def test_runtime_comparisons_after_the_first_cover_what_changed_on_either_side():
    s = Store(ONLINE, frozenset({0}), strict_reservation=False)
    s.add(rec("a", STATIC, "2-3"))
    s.add(rec("b", SHARED))
    applied = {k: s.effective(r) for k, r in s.records.items()}
    s.check(applied, set())  # the first comparison covers every container
    applied[("a", "c")] = frozenset({9})  # a runtime write the store did not ask for
    with pytest.raises(StoreInvariantError, match="runtime cpuset"):
        s.check(applied, {("a", "c")})
    applied[("a", "c")] = frozenset({2, 3})
    s.check(applied, {("a", "c")})
    s.add(rec("d", CCI, shared="8-9"))  # a store change the runtime has not applied (the held set is unchanged)
    with pytest.raises(StoreInvariantError, match=r"\('d', 'c'\): runtime cpuset"):
        s.check(applied, set())
    applied[("d", "c")] = frozenset({8, 9})
    s.add(rec("e", STATIC, "10"))  # the held set changed: every shared container's cpuset may have
    applied[("e", "c")] = frozenset({10})
    with pytest.raises(StoreInvariantError, match=r"\('b', 'c'\): runtime cpuset"):
        s.check(applied, {("e", "c")})


def test_cheap_checks_trust_only_what_the_full_check_recomputes_every_few_calls():
    from cci_conformance.node.store import FULL_CHECK_EVERY
    s = Store(ONLINE, frozenset({0}), strict_reservation=False)
    s.add(rec("a", STATIC, "2-3"))
    applied = {k: s.effective(r) for k, r in s.records.items()}
    s.check(applied, set())
    s._held = s._held | {9}  # a running total out of step with the held set: caught at once
    with pytest.raises(StoreInvariantError, match="pairwise"):
        s.check(applied, set())
    s._held = frozenset({2, 3})
    s.records[("a", "c")] = rec("a", STATIC, "0-1")  # a bug behind add(): sizes still add up
    s._held = frozenset({0, 1})
    calls = []
    with pytest.raises(StoreInvariantError, match="reserved"):
        while len(calls) <= FULL_CHECK_EVERY:  # a full check comes within FULL_CHECK_EVERY calls
            calls.append(1)
            s.check(applied, set())
    assert len(calls) <= FULL_CHECK_EVERY


def test_files_roundtrip_and_kubelet_view(root):
    cfg = config()
    store = Store(ONLINE, cfg.reserved, False)
    store.add(rec("a", STATIC, "2-3"))
    store.add(rec("b", CCI, "4", withheld="12"))
    files = StateFiles(root, cfg, store)
    files.save(3, [{"why": "removal", "driver": "d"}])
    cpu = (root / "cpu_manager_state").read_bytes()
    assert cpu.startswith(b'{"policyName":"static","defaultCpuSet":"0-1,5-11,13-15","entries":{"a":{"c":"2-3"},'
                          b'"b":{"c":"4,12"}},"checksum":')
    outer = json.loads((root / "cci_manager_state").read_bytes())
    assert crc32_ieee(outer["Data"].encode()) == outer["Checksum"]
    assert outer["Data"] == canonical(json.loads(outer["Data"]))  # canonical form, byte for byte
    data = json.loads(outer["Data"])
    assert data["generation"] == 3 and data["pending"] == [{"why": "removal", "driver": "d", "id": 1}]
    assert data["cpuManagerState"]["current"] == json.loads(cpu)["checksum"]
    loaded = StateFiles(root, cfg, Store(ONLINE, cfg.reserved, False)).load()
    assert loaded.records == [store.records[("a", "c")], store.records[("b", "c")]]


def test_alpha_writes_policy_none(root):
    cfg = config("alpha")
    store = Store(ONLINE, cfg.reserved, False)
    store.add(rec("b", CCI, "4"))
    StateFiles(root, cfg, store).save(1, [])
    raw = (root / "cpu_manager_state").read_bytes()
    # byte for byte the file a real kubelet with policy none writes (quoted in siderolabs/talos PR #7557)
    assert raw == b'{"policyName":"none","defaultCpuSet":"","checksum":1353318690}'


def test_corrupt_files_stop_with_what_to_delete(root):
    cfg = config()
    store = Store(ONLINE, cfg.reserved, False)
    store.add(rec("a", STATIC, "2-3"))
    StateFiles(root, cfg, store).save(1, [])
    good_cci = (root / "cci_manager_state").read_bytes()
    (root / "cci_manager_state").write_bytes(good_cci.replace(b"2-3", b"2-4"))
    with pytest.raises(CheckpointError, match="checksum mismatch.*delete the CCI manager checkpoint file"):
        StateFiles(root, cfg, Store(ONLINE, cfg.reserved, False)).load()
    (root / "cci_manager_state").write_bytes(good_cci)
    cpu = (root / "cpu_manager_state").read_bytes()
    (root / "cpu_manager_state").write_bytes(cpu.replace(b'"checksum":', b'"checksum":1'))
    with pytest.raises(CheckpointError, match="could not restore state from checkpoint: .*please drain this node "
                                              "and delete the CPU manager checkpoint file .*cpu_manager_state"):
        StateFiles(root, cfg, Store(ONLINE, cfg.reserved, False)).load()
    (root / "cpu_manager_state").write_bytes(cpu)
    with pytest.raises(CheckpointError, match="configured mode 'alpha' differs from checkpoint mode"):
        StateFiles(root, config("alpha"), Store(ONLINE, cfg.reserved, False)).load()
    (root / "cci_manager_state").unlink()
    with pytest.raises(CheckpointError, match='configured policy "none" differs from state checkpoint policy "static"'):
        StateFiles(root, config("alpha"), Store(ONLINE, cfg.reserved, False)).load()
    with pytest.raises(CheckpointError):
        decode(b"not json", root / "x")


def test_kill_between_the_two_writes_is_recognised(root):
    cfg = config()
    store = Store(ONLINE, cfg.reserved, False)
    files = StateFiles(root, cfg, store)
    files.save(1, [])
    old_cpu = (root / "cpu_manager_state").read_bytes()
    store.add(rec("a", STATIC, "2-3"))
    files.save(1, [])
    (root / "cpu_manager_state").write_bytes(old_cpu)  # as if killed after the cci write
    StateFiles(root, cfg, Store(ONLINE, cfg.reserved, False)).load()  # accepted: the previous file
    foreign = Store(ONLINE, cfg.reserved, False)
    foreign.add(rec("z", STATIC, "7"))
    other = Path(tempfile.mkdtemp(prefix="cci-", dir="/tmp"))
    try:
        StateFiles(other, cfg, foreign).save(1, [])
        shutil.copy(other / "cpu_manager_state", root / "cpu_manager_state")
    finally:
        shutil.rmtree(other)
    with pytest.raises(CheckpointError, match="disagree.*delete both"):
        StateFiles(root, cfg, Store(ONLINE, cfg.reserved, False)).load()


def test_validate_state_texts(root):
    cfg = config()
    (root / "cpu_manager_state").write_bytes(
        b'{"policyName":"static","defaultCpuSet":"1-15","checksum":%d}' % checksum("static", "1-15", {}))
    with pytest.raises(CheckpointError, match='not all reserved cpus: "0" are present in defaultCpuSet'):
        StateFiles(root, cfg, Store(ONLINE, cfg.reserved, False), _policy(cfg)).load()


def _policy(cfg):
    from cci_conformance.node.static import make_policy
    from cci_conformance.topology.model import CPU, NumaNode, Topology
    topo = Topology("t", tuple(CPU(i, 0, 0, i % 8, 0) for i in range(16)), (NumaNode(0, ONLINE, 1, (10,)),))
    return make_policy(topo, cfg)
