"""Unit tests of the dra-cpu checks: recorder-log replay, published devices against sysfs, claim and pod objects."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from cci_conformance.kind import dracpu_log, dracpu_pods, dracpu_slices
from cci_conformance.kind.dracpu_log import Grant, Replay
from cci_conformance.topology import library

T0 = datetime(2026, 12, 1, 22, 0, tzinfo=UTC)


def _line(op, cid, cpus="", *, pod="", ctr="c0", kind="container", ns="default", at=0):
    # The recorder writes Go's RFC3339Nano: nine fractional digits.
    stamp = T0 + timedelta(seconds=at)
    raw = {"op": op, "id": cid, "cpus": cpus, "time": stamp.strftime("%Y-%m-%dT%H:%M:%S") + ".123456789Z"}
    if op == "create":
        raw.update({"container-type": kind, "container-name": ctr, "sandbox-name": pod, "sandbox-namespace": ns})
    return json.dumps(raw)


def _log(*lines):
    return dracpu_log.parse("\n".join(lines))


GRANT = Grant("g-c0", "default", "g", "c0", frozenset({2, 3}))


def test_parse_keeps_identity_on_updates_and_reads_nanosecond_times():
    records = _log(_line("create", "a", "0-7", pod="s", at=1), _line("update", "a", "0-1,4", at=2))
    assert records[1].pod == "s" and records[1].cpus == frozenset({0, 1, 4})
    assert records[1].time == T0 + timedelta(seconds=2, microseconds=123456)


def test_a_create_without_cpuset_means_every_cpu_and_overlaps_the_grant():
    records = _log(_line("create", "g1", "2-3", pod="g"), _line("create", "s1", "", pod="s"))
    assert records[1].cpus is dracpu_log.EVERY_CPU
    violations = Replay([GRANT]).run(records)
    assert [(v.container[1], v.overlap, v.claimed) for v in violations] == [("s", frozenset({2, 3}), False)]
    assert "no cpuset (every CPU)" in violations[0].describe()


def test_shared_container_updated_off_the_grant_before_its_create_passes():
    # The driver updates shared containers before the claimed container is created (NRI CreateContainer).
    records = _log(_line("create", "s1", "0-7", pod="s"), _line("update", "s1", "0-1,4-7"),
                   _line("create", "g1", "2-3", pod="g"))
    assert Replay([GRANT]).run(records) == []


def test_shared_update_onto_a_live_grant_is_caught_after_a_container_restart():
    records = _log(_line("create", "s1", "0-7", pod="s"), _line("update", "s1", "0-1,4-7"),
                   _line("create", "g1", "2-3", pod="g"), _line("update", "s1", "0-7"),
                   _line("create", "g2", "2-3", pod="g"))
    violations = Replay([GRANT]).run(records)
    assert [(v.index, v.container_id) for v in violations] == [(3, "s1")]


def test_grant_ended_and_gone_containers_and_sandboxes_are_not_counted():
    records = _log(_line("create", "old", "0-7", pod="o", at=0), _line("create", "g1", "2-3", pod="g", at=2),
                   _line("create", "p", "", pod="x", kind="sandbox", at=3), _line("create", "s2", "0-7", pod="s", at=9))
    ended = Grant("g-c0", "default", "g", "c0", frozenset({2, 3}), end=3)
    assert Replay([ended], gone={"old": T0 + timedelta(seconds=1)}).run(records) == []
    # Without the end and the gone time both are overlaps; the sandbox never is.
    assert {v.container_id for v in Replay([GRANT]).run(records)} == {"old", "s2"}


def test_two_claims_overlapping_are_claimed_violations():
    other = Grant("h-c0", "default", "h", "c0", frozenset({3, 4}))
    records = _log(_line("create", "g1", "2-3", pod="g"), _line("create", "h1", "3-4", pod="h"))
    violations = Replay([GRANT, other]).run(records)
    assert violations and all(v.claimed for v in violations)


def test_replay_from_an_offset_keeps_only_containers_alive_at_the_start():
    records = _log(_line("create", "dead", "0-7", pod="d"), _line("create", "live", "0-1", pod="l"),
                   _line("create", "g1", "2-3", pod="g"))
    assert Replay([GRANT]).run(records, start=2, live_before={"live"}) == []
    assert [v.container_id for v in Replay([GRANT]).run(records, start=2, live_before={"live", "dead"})] == ["dead"]


def test_gone_from_checkpoints_bounds_only_containers_created_before():
    records = _log(_line("create", "a", "0", pod="a", at=0), _line("create", "b", "0", pod="b", at=10))
    gone = dracpu_log.gone_from_checkpoints(records, [(T0 + timedelta(seconds=5), set())])
    assert gone == {"a": T0 + timedelta(seconds=5)}


def test_creates_of_and_last_cpus():
    records = _log(_line("create", "g1", "2-3", pod="g"), _line("update", "g1", "2"),
                   _line("create", "g2", "", pod="g"))
    assert [r.container_id for r in dracpu_log.creates_of(records, "default", "g", "c0")] == ["g1", "g2"]
    assert dracpu_log.last_cpus(records, "g1") == frozenset({2})
    assert dracpu_log.last_cpus(records, "g2") is None


def _published(topology, *, break_cpu=None, drop=None):
    out = {}
    l3 = {cpu: cache.id for cache in topology.caches if cache.level == 3 for cpu in cache.cpus}
    for i, cpu in enumerate(sorted(topology.cpus, key=lambda c: c.id)):
        if cpu.id == drop:
            continue
        out[f"cpudev{i:03d}"] = {"dra.cpu/cpuID": cpu.id, "dra.cpu/numaNodeID": cpu.node,
                                 "dra.cpu/socketID": cpu.package, "dra.cpu/coreID": cpu.core,
                                 "dra.cpu/coreType": "standard", "dra.cpu/smtEnabled": topology.smt_control == "on",
                                 "dra.cpu/cacheL3ID": l3.get(cpu.id, -1)}
        if cpu.id == break_cpu:
            out[f"cpudev{i:03d}"]["dra.cpu/numaNodeID"] = 99
    return out


def test_published_devices_match_or_name_the_difference():
    topology = library.load("server-2s8c-smt2-intel")
    assert dracpu_slices.mismatches(topology, _published(topology)) == []
    wrong = dracpu_slices.mismatches(topology, _published(topology, break_cpu=5))
    assert wrong == ["cpudev005 (cpu5): dra.cpu/numaNodeID is 99, sysfs says 0"]
    missing = dracpu_slices.mismatches(topology, _published(topology, drop=7))
    assert any("devices cover CPUs" in p for p in missing)
    # Reserved CPUs must not be published.
    assert any("devices cover" in p for p in dracpu_slices.mismatches(topology, _published(topology), frozenset({0})))


def test_slices_are_read_per_node_and_driver_and_claims_map_to_cpus():
    attributes = {"dra.cpu/cpuID": {"int": 4}, "dra.cpu/smtEnabled": {"bool": True}}
    mine = [{"name": "cpudev000", "attributes": attributes}]
    slices = [{"spec": {"driver": "dra.cpu", "nodeName": "w", "devices": mine}},
              {"spec": {"driver": "other", "nodeName": "w", "devices": [{"name": "x", "attributes": {}}]}}]
    published = dracpu_slices.devices(slices, "w")
    assert published == {"cpudev000": {"dra.cpu/cpuID": 4, "dra.cpu/smtEnabled": True}}
    claim = {"status": {"allocation": {"devices": {"results": [{"driver": "dra.cpu", "device": "cpudev000"}]}}}}
    assert dracpu_slices.allocated_cpus(claim, dracpu_slices.device_cpus(published)) == frozenset({4})
    assert dracpu_slices.allocated_cpus({"status": {}}, {}) == frozenset()


def test_split_cores_on_smt2_and_smt4():
    smt2 = library.load("server-2s8c-smt2-intel")
    core = smt2.cores[0]
    assert dracpu_slices.split_cores(smt2, core) == []
    assert dracpu_slices.split_cores(smt2, frozenset({min(core)})) == [frozenset({min(core)})]
    smt4 = library.load("smt4-2s")
    assert len(dracpu_slices.split_cores(smt4, frozenset(sorted(smt4.online_cpus)[:4]))) in (0, 4)


def test_claims_and_pods_go_through_the_scheduler():
    claim = dracpu_pods.claim("c", 4)
    assert claim["spec"]["devices"]["requests"][0]["exactly"] == {
        "deviceClassName": "dra.cpu", "allocationMode": "ExactCount", "count": 4}
    with pytest.raises(ValueError):
        dracpu_pods.claim("c", 33)
    pod = dracpu_pods.pod("p", "w", "pause", ("c1", "c2"))
    assert "nodeName" not in pod["spec"] and pod["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "w"}
    assert pod["spec"]["containers"][0]["resources"]["claims"] == [{"name": "r0"}, {"name": "r1"}]
    assert "resources" not in dracpu_pods.pod("s", "w", "pause")["spec"]["containers"][0]
    assert dracpu_pods.fill_counts(64) == [32, 32] and dracpu_pods.fill_counts(8) == [8]
    assert sum(dracpu_pods.fill_counts(70)) == 70






def test_a_pod_can_hold_its_prepared_claim_before_its_container_exists():
    pod = dracpu_pods.pod("p", "w", "pause", ("c1",), wait_first=True)
    (init,) = pod["spec"]["initContainers"]
    assert init["name"] == "wait" and "resources" not in init  # the claim is the main container's only
    assert pod["spec"]["containers"][0]["resources"]["claims"] == [{"name": "r0"}]
    assert "initContainers" not in dracpu_pods.pod("p", "w", "pause", ("c1",))["spec"]



def test_group_devices_against_numa_nodes():
    topology = library.load("server-2s8c-smt2-intel")
    nodes = topology.node_cpus
    published = {f"cpudevnuma{n:03d}": {"dra.cpu/numaNodeID": n, "dra.cpu/numCPUs": len(cpus),
                                         "dra.cpu/socketID": topology.by_id[min(cpus)].package}
                 for n, cpus in nodes.items()}
    assert dracpu_slices.group_mismatches(topology, published) == []
    published["cpudevnuma000"]["dra.cpu/numCPUs"] = 1
    assert dracpu_slices.group_mismatches(topology, published) == [
        f"cpudevnuma000: numCPUs is 1, NUMA node 0 has {len(nodes[0])}"]
    del published["cpudevnuma001"]
    assert "group devices for NUMA nodes" in dracpu_slices.group_mismatches(topology, published)[-1]
