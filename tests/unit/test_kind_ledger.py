"""The kind CCI ledger from the kubelet's files and the recorder log: effective cpusets, assignments, the runtime's
containers, registrations, and the ledger read through the node's root."""

from __future__ import annotations

import json

import pytest

from cci_conformance.cpu_manager_state import CPUManagerState
from cci_conformance.cpuset import parse_cpulist
from cci_conformance.kind.cci import ledger, node_view


def _read(records, entries, default="0,8-15", recorder="") -> node_view.NodeRead:
    cpu = CPUManagerState("static", parse_cpulist(default), entries)
    return node_view.NodeRead(b"", b"", cpu, {"mode": "coexistence", "containers": records, "pending": []},
                              recorder, parse_cpulist("0-15"), frozenset({0}), 1, 10, 0.0, True, (), "")


def _record(pod, exclusive="", withheld="", shared="", groups=()):
    return {"podUID": pod, "container": "c0", "exclusive": exclusive, "withheld": withheld, "shared": shared,
            "groups": [{"cpuset": g, "exclusive": bool(exclusive)} for g in groups], "claimUID": "cl-" + pod,
            "claimName": "claim-" + pod}


def test_effective_cpusets_follow_the_kubelets_rule():
    shared = _record("b", shared="4-7", groups=("4-7",))
    read = _read([_record("a", exclusive="2,3", withheld="1", groups=("2,3",)), shared],
                 {"a": {"c0": parse_cpulist("1-3")}, "s": {"c0": parse_cpulist("4,5")}})
    # SHARED groups minus what others hold (the static pod's 4,5); exclusive ones are the grant without withheld.
    assert ledger.effective(shared, read) == {6, 7}
    assert ledger.effective(read.cci["containers"][0], read) == {2, 3}
    # Nothing left: the shared pool.
    assert ledger.effective(_record("c", shared="4,5"), read) == parse_cpulist("0,8-15")


def created_lines(cid, pod, name, cpus, started=True) -> str:
    """The recorder's lines for a container the kubelet created (and runc started)."""
    line = json.dumps({"op": "create", "id": cid, "cpus": cpus, "container-type": "container",
                       "sandbox-uid": pod, "container-name": name}) + "\n"
    return line + (json.dumps({"op": "start", "id": cid}) + "\n" if started else "")


def _api_pod(uid, cid="", state=None) -> dict:
    status = [{"name": "c0", "containerID": f"containerd://{cid}", "state": state or {"running": {}}}] if cid else []
    return {"metadata": {"uid": uid, "name": "p" + uid, "namespace": "n"}, "spec": {"containers": [{"name": "c0"}]},
            "status": {"containerStatuses": status}}


def test_assignments_and_containers_read_the_kubelets_files():
    recorder = created_lines("ida", "a", "c0", "2-3") + created_lines("ids", "s", "c0", "0,8-15") + \
        '{"op":"update","id":"ids","cpus":"4,5"}\n'
    read = _read([_record("a", exclusive="2,3", groups=("2,3",))], {"a": {"c0": parse_cpulist("2,3")},
                                                                     "s": {"c0": parse_cpulist("4,5")}},
                 recorder=recorder)
    pod = _api_pod("a", "ida")
    (a,) = ledger.assignments(pod, read)
    assert (a.pod_uid, a.source, a.cpus, a.exclusive, a.groups, a.container_id) == \
        ("a", "cci", {2, 3}, True, ({2, 3},), "ida")
    states = ledger.containers_of([pod, _api_pod("s", "ids")], read)
    assert [(c.pod_uid, c.source, c.store_cpus, c.runtime_cpus, c.running) for c in states] == \
        [("a", "cci", {2, 3}, {2, 3}, True), ("s", "static", {4, 5}, {4, 5}, True)]
    assert ledger.exclusive_map(read) == {"a/c0": {2, 3}, "s/c0": {4, 5}}
    with pytest.raises(Exception, match="no create in the recorder log"):
        ledger.containers_of([_api_pod("x", "idx")], read)  # the kubelet reports a container the runtime never made


def test_the_runtime_not_the_api_server_says_which_containers_exist_and_run():
    """The API server reports a container a PLEG relist after the runtime started it: a container it has not
    reported yet is still checked (ACCT-008 would otherwise pass on fewer containers), it runs once runc started
    it, and one the API server reports terminated no longer runs."""
    recorder = created_lines("idb", "b", "c0", "4-7") + created_lines("idc", "c", "c0", "4-7", started=False) + \
        created_lines("idt", "t", "c0", "4-7")
    read = _read([], {}, recorder=recorder)
    b, c, t = _api_pod("b"), _api_pod("c"), _api_pod("t", "idt", {"terminated": {"exitCode": 0}})
    states = ledger.containers_of([b, c, t, _api_pod("n")], read)
    assert [(s.pod_uid, s.container_id, s.running) for s in states] == \
        [("b", "idb", True), ("c", "idc", False), ("t", "idt", False)]
    assert ledger.pod_started(b, read) and not ledger.pod_started(c, read)
    assert not ledger.pod_started(_api_pod("n"), read)
    (a,) = ledger.assignments(b, read)
    assert a.container_id == "idb" and a.source == "shared"
    recreated = created_lines("idb2", "b", "c0", "4-5", started=False)  # the kubelet's latest create is the container
    states = ledger.containers_of([b], _read([], {}, recorder=recorder + recreated))
    assert [(s.container_id, s.runtime_cpus, s.running) for s in states] == [("idb2", {4, 5}, False)]
    with pytest.raises(Exception, match="no cpuset in the recorder log"):
        ledger.containers_of([b], _read([], {}, recorder=created_lines("idb", "b", "c0", "")))


def test_registrations_are_the_kubelets_answers_after_its_start():
    journal = ('100.5 w kubelet[7]: I1202 registry.go:99] "CCI driver registered" driver="go-reference" '
               'endpoint="/var/lib/kubelet/plugins/go-reference/cci.sock"\n'
               '102.25 w kubelet[7]: I1202 registry.go:90] "CCI driver registration refused" driver="x" '
               'endpoint="/e" reason="endpoint \'/e\' is not under \\"/var/lib/kubelet/plugins/\\""\n'
               '103.0 w kubelet[7]: I1202 registry.go:99] "CCI driver registered" driver="other" endpoint="/o"\n'
               '104.0 w kubelet[7]: I1202 registry.go:99] "CCI driver registered" driver="go-reference" endpoint="/e"\n'
               "garbage line\n")
    events = node_view.kubelet_registrations(journal, 101.0, "go-reference")
    assert events == ["endpoint '/e' is not under \"/var/lib/kubelet/plugins/\"", None]
    assert node_view.kubelet_registrations(journal, 0.0, "go-reference")[0] is None


_CCI_HEAD = '{"kind":"CCICheckpoint","apiVersion":"checkpoint.cci.cci-conformance.io/v1","mode":"coexistence",'


def _node_root(tmp_path, cci_text: str, recorder: str | None):
    from cci_conformance.cpu_manager_state import dumps
    from cci_conformance.node import checkpoint

    kubelet = tmp_path / "var" / "lib" / "kubelet"
    kubelet.mkdir(parents=True)
    cpu = CPUManagerState("static", parse_cpulist("0,8-15"), {"a": {"c0": parse_cpulist("2,3")}})
    (kubelet / "cpu_manager_state").write_bytes(dumps(cpu))
    (kubelet / "cci_manager_state").write_bytes(checkpoint.encode(cci_text))
    cpu_dir = tmp_path / "sys" / "devices" / "system" / "cpu"
    cpu_dir.mkdir(parents=True)
    (cpu_dir / "online").write_text("0-15\n")
    if recorder is not None:
        (tmp_path / "var" / "log").mkdir(parents=True)
        (tmp_path / "var" / "log" / "cci-cpusets.jsonl").write_text(recorder)
    return tmp_path


def test_the_ledger_reads_the_kubelets_files_through_the_node_root(tmp_path):
    cci = _CCI_HEAD + '"containers":[],"pending":[{"podUID":"a"}]}'
    root = _node_root(tmp_path, cci, created_lines("ida", "a", "c0", "2-3"))
    ledger = node_view.read_ledger(root)
    assert ledger.cpu.entries == {"a": {"c0": {2, 3}}} and ledger.cpu.default_cpuset == parse_cpulist("0,8-15")
    assert ledger.online == parse_cpulist("0-15") and ledger.shared_pool() == parse_cpulist("0,8-15")
    assert ledger.cci["pending"] == [{"podUID": "a"}] and node_view.runtime_containers(ledger.recorder) == \
        {("a", "c0"): node_view.RuntimeContainer("ida", frozenset({2, 3}), True)}
    assert node_view.read_ledger(_node_root(tmp_path / "fresh", cci, None)).recorder == ""  # nothing recorded yet


def test_the_ledger_leaves_a_recorder_line_still_being_appended_for_the_next_read(tmp_path):
    cci = _CCI_HEAD + '"containers":[],"pending":[]}'
    whole = created_lines("ida", "a", "c0", "2-3")
    ledger = node_view.read_ledger(_node_root(tmp_path, cci, whole + '{"op":"create","id":"idb","cpu'))
    assert ledger.recorder == whole
    assert set(node_view.runtime_containers(ledger.recorder)) == {("a", "c0")}


def test_a_ledger_with_a_missing_or_corrupt_checkpoint_is_an_error_naming_the_file(tmp_path):
    root = _node_root(tmp_path, _CCI_HEAD + '"containers":[],"pending":[]}', "")
    raw = (root / "var/lib/kubelet/cci_manager_state").read_bytes()
    (root / "var/lib/kubelet/cci_manager_state").write_bytes(raw.replace(b"coexistence", b"coexistencf"))
    with pytest.raises(Exception, match="cci_manager_state"):  # the checksum no longer matches
        node_view.read_ledger(root)
    (root / "var/lib/kubelet/cpu_manager_state").unlink()
    with pytest.raises(node_view.NodeReadError, match="/var/lib/kubelet/cpu_manager_state is missing"):
        node_view.read_ledger(root)


def test_a_release_is_seen_only_once_the_held_cpus_are_back_in_the_shared_pool():
    """The static policy's RemoveContainer writes its checkpoint twice (the entry deleted, then the shared pool
    grown): the read between the two writes is not a release, or a check after it compares the runtime with a
    shared pool the kubelet is about to grow (a false ACCT-008 failure on kind on a slow host)."""
    whole = _read([], {"gone": {"c0": parse_cpulist("4,20")}, "other": {"c0": parse_cpulist("5")}},
                  default="0-3,6-19,21-31")
    held = ledger.held_by(whole, {"gone"})
    assert held == {4, 20}
    assert not ledger.released(whole, {"gone"}, held)
    between = _read([], {"other": {"c0": parse_cpulist("5")}}, default="0-3,6-19,21-31")
    assert not ledger.released(between, {"gone"}, held)
    after = _read([], {"other": {"c0": parse_cpulist("5")}}, default="0-4,6-31")
    assert ledger.released(after, {"gone"}, held)
    # CPUs handed on to another pod's assignment are released too; a CCI record left is not.
    assert ledger.released(_read([], {"next": {"c0": parse_cpulist("4,20")}}), {"gone"}, held)
    assert not ledger.released(_read([_record("gone")], {}, default="0-31"), {"gone"}, held)
