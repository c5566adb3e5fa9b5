"""The cluster backend's pure parts: labels and namespaces, the nodes' machines and profiles, options, polling."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cci_conformance.cluster import cgroup_log, kube, node_facts
from cci_conformance.cluster.dra_session import profile_mismatch
from cci_conformance.cluster.helper import NSENTER, helper_pod
from cci_conformance.cluster.run import check_options
from cci_conformance.cluster.worker import daemonset_name, node_objects
from cci_conformance.dra.api import POLICY_NONE, static_reserved
from cci_conformance.dra.deployment import DriverDeployment
from cci_conformance.errors import ConfigError
from cci_conformance.kind.cluster.cpuset_log import EVERY_CPU
from cci_conformance.topology import library
from cci_conformance.topology.render import render
from cci_conformance.topology.sysfs_reader import read_sysfs


# -- labels and namespaces --------------------------------------------------------------------------------
def test_every_object_carries_the_run_label_and_a_workload_its_pods_too():
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d", "labels": {"app": "x"}},
          "spec": {"template": {"metadata": {"labels": {"app": "x"}}}}}
    out = kube.labelled(ds, "ab12cd34", "node-1")
    assert out["metadata"]["labels"] == {"app": "x", kube.RUN_LABEL: "ab12cd34", kube.NODE_LABEL: "node-1"}
    assert out["spec"]["template"]["metadata"]["labels"][kube.RUN_LABEL] == "ab12cd34"
    assert ds["metadata"]["labels"] == {"app": "x"}  # the input is left alone
    assert kube.selector("ab12cd34") == f"{kube.RUN_LABEL}=ab12cd34"


@pytest.mark.parametrize("bad", ["", "UPPER", "a" * 33, "-x", "x y"])
def test_a_run_id_that_is_no_label_value_is_refused(bad):
    with pytest.raises(ValueError, match="label value"):
        kube.selector(bad)


def test_each_node_gets_a_namespace_that_is_a_dns_label_and_unique():
    short = kube.node_namespace("ab12cd34", "kind-worker2")
    assert short == "cci-ab12cd34-kind-worker2"
    long_a = kube.node_namespace("ab12cd34", "ip-10-0-0-1.eu-west-1.compute.internal." + "x" * 40)
    long_b = kube.node_namespace("ab12cd34", "ip-10-0-0-1.eu-west-1.compute.internal." + "y" * 40)
    for name in (long_a, long_b):
        assert len(name) <= 63 and name[0].isalnum() and name[-1].isalnum() and "." not in name
    assert long_a != long_b


def test_the_suites_namespace_is_mapped_to_the_nodes_in_arguments_and_documents():
    assert kube.map_args(("get", "pod", "p", "-n", "default", "-o", "json"), "ns1") == \
        ("get", "pod", "p", "-n", "ns1", "-o", "json")
    assert kube.map_args(("get", "pods", "-n", "kube-system"), "ns1") == ("get", "pods", "-n", "kube-system")
    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "default"}}
    other = {"kind": "DaemonSet", "metadata": {"name": "d", "namespace": "kube-system"}}
    assert kube.in_namespace(pod, "ns1")["metadata"]["namespace"] == "ns1"
    assert kube.in_namespace(other, "ns1") == other


def test_a_namespaced_kubectl_rewrites_what_it_sends(monkeypatch, tmp_path):
    sent = []
    monkeypatch.setattr(kube, "run", lambda argv, timeout, stdin=None: sent.append((argv, stdin)) or "")
    k = kube.Kube(tmp_path / "kc", "kubectl", "ns1")
    doc = {"apiVersion": "v1", "kind": "List", "items": [{"kind": "Pod", "metadata": {"namespace": "default"}}]}
    k.kubectl("apply", "-f", "-", stdin=json.dumps(doc))
    k.kubectl("delete", "pod", "x", "-n", "default")
    assert json.loads(sent[0][1])["items"][0]["metadata"]["namespace"] == "ns1"
    assert sent[1][0][-2:] == ["-n", "ns1"] or list(sent[1][0][-2:]) == ["-n", "ns1"]
    assert sent[0][0][:3] == ["kubectl", "--kubeconfig", str(tmp_path / "kc")]


# -- the helper pod and the driver's objects ---------------------------------------------------------------
def test_the_helper_is_privileged_hostpid_pinned_and_brings_the_nodes_tools():
    pod = helper_pod("w1", "ns1", "registry.k8s.io/pause:3.10", "ab12cd34")
    spec = pod["spec"]
    assert spec["hostPID"] is True and spec["nodeSelector"] == {"kubernetes.io/hostname": "w1"}
    assert spec["containers"][0]["securityContext"] == {"privileged": True}
    assert {m["mountPath"] for m in spec["containers"][0]["volumeMounts"]} >= {"/usr", "/bin", "/lib"}
    assert all(m["readOnly"] for m in spec["containers"][0]["volumeMounts"])
    assert pod["metadata"]["labels"][kube.RUN_LABEL] == "ab12cd34"
    assert NSENTER[:3] == ("nsenter", "-t", "1")
    with pytest.raises(ValueError, match="s390x"):
        helper_pod("w1", "ns1", "pause", "ab12cd34", arch="s390x")


def test_each_node_gets_its_own_labelled_daemonset_pulled_as_the_vendor_would():
    objs = node_objects(DriverDeployment("example.com/driver:1.0", "w1"), "ab12cd34")
    ds = next(o for o in objs if o["kind"] == "DaemonSet")
    assert ds["metadata"]["name"] == daemonset_name("w1") != daemonset_name("w2")
    assert ds["spec"]["selector"]["matchLabels"][kube.NODE_LABEL] == "w1"
    assert ds["spec"]["template"]["metadata"]["labels"][kube.NODE_LABEL] == "w1"
    assert ds["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert all(o["metadata"]["labels"][kube.RUN_LABEL] == "ab12cd34" for o in objs)


# -- the node's machine: the same reader as a faked machine's -------------------------------------------
@pytest.mark.parametrize("name", ["laptop-1s4c-smt2", "server-2s-snc4", "hybrid-8p8e"])
def test_a_machine_read_through_the_dump_equals_the_machine(tmp_path, name):
    topology = library.load(name)
    rendered = render(topology, tmp_path / "rendered")
    script = node_facts.dump_script(str(rendered / "sys"), str(rendered / "proc"))
    dump = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True, timeout=60).stdout
    back = node_facts.read_topology(node_facts.write_tree(dump, tmp_path / "node").parent, "w1")
    direct = read_sysfs(rendered / "sys", name="w1")
    assert back == replace(direct, pci_devices=())  # PCI is not read from nodes
    assert back.name == "w1" and back.model_name == direct.model_name and back.vendor == direct.vendor
    summary = node_facts.topology_summary(back, dump)
    assert summary["numa_nodes"] == len(topology.nodes) and summary["threads_per_core"] == topology.threads_per_core


def test_this_hosts_sysfs_reads_the_same_through_the_dump(tmp_path):
    if not Path("/sys/devices/system/cpu/online").exists():
        pytest.skip("no sysfs here")
    dump = subprocess.run(["sh", "-c", node_facts.DUMP_SCRIPT], capture_output=True, text=True, check=True,
                          timeout=60).stdout
    back = node_facts.read_topology(node_facts.write_tree(dump, tmp_path).parent, "host")
    assert back == replace(read_sysfs(Path("/sys"), name="host"), pci_devices=())


def test_a_dump_naming_a_path_outside_sys_is_refused(tmp_path):
    with pytest.raises(ValueError, match="outside /sys"):
        node_facts.write_tree(f"{node_facts.FILE}../../etc/passwd\nx\n", tmp_path)


# -- the node's kubelet profile ----------------------------------------------------------------------------
def test_the_profile_comes_from_the_kubelets_configz():
    assert node_facts.node_profile({"kubeletconfig": {"cpuManagerPolicy": "none"}}) == (POLICY_NONE, "")
    assert node_facts.node_profile({"kubeletconfig": {}}) == (POLICY_NONE, "")
    have, _ = node_facts.node_profile({"kubeletconfig": {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1"}})
    assert have == static_reserved(frozenset({0, 1}))
    none, why = node_facts.node_profile({"kubeletconfig": {"cpuManagerPolicy": "static"}})
    assert none is None and "reservedSystemCPUs" in why


def test_a_profile_the_node_does_not_run_is_untested_with_the_reason():
    assert profile_mismatch("w1", POLICY_NONE, "", POLICY_NONE) == ""
    assert profile_mismatch("w1", static_reserved(frozenset({0, 1})), "", static_reserved()) == ""
    reason = profile_mismatch("w1", POLICY_NONE, "", static_reserved())
    assert "w1" in reason and "static-reserved" in reason and "never reconfigures" in reason
    assert "policy 'x'" in profile_mismatch("w1", None, "policy 'x'", POLICY_NONE)


# -- options -----------------------------------------------------------------------------------------------
def test_cluster_options_are_checked_with_the_option_and_the_fix(tmp_path):
    kc = tmp_path / "kc"
    kc.write_text("")
    check_options(str(kc), ["w1", "w2"], 2, None, None)
    cases = [((None, ["w1"], None, None, None), "--kubeconfig"),
             ((str(tmp_path / "missing"), ["w1"], None, None, None), "--kubeconfig"),
             ((str(kc), None, None, None, None), "--node"),
             ((str(kc), ["w1", "w1"], None, None, None), "--node"),
             ((str(kc), ["w1"], None, ["laptop-1s4c-smt2"], None), "--topology"),
             ((str(kc), ["w1"], None, None, "v1.37.2"), "--kubernetes"),
             ((str(kc), ["w1"], 3, None, None), "-n")]
    for args, option in cases:
        with pytest.raises(ConfigError) as caught:
            check_options(*args)
        assert option in str(caught.value), (args, str(caught.value))


# -- cpusets polled from cgroups where the node has no recorder ------------------------------------------
def test_polling_makes_an_append_only_log_of_creates_and_changes():
    names = {"a": ("ns", "p1", "c0"), "b": ("ns", "p2", "c0")}
    log = cgroup_log.PolledLog()
    at = datetime(2026, 1, 1, tzinfo=UTC)
    first = log.observe(cgroup_log.parse_snapshot("a 0-3\nb \n"), names, at)
    assert [(r.op, r.container_id, r.cpus, r.pod) for r in first] == \
        [("create", "a", frozenset({0, 1, 2, 3}), "p1"), ("create", "b", EVERY_CPU, "p2")]
    again = log.observe(cgroup_log.parse_snapshot("a 0-3\nb \n"), names, at)
    assert again == first  # nothing changed, nothing added
    later = log.observe(cgroup_log.parse_snapshot("a 2-3\nb \n"), names, at)
    assert [(r.index, r.op, r.cpus) for r in later[len(first):]] == [(2, "update", frozenset({2, 3}))]


def test_crictl_labels_name_each_container():
    text = json.dumps({"containers": [{"id": "a", "labels": {"io.kubernetes.pod.namespace": "ns",
                                                             "io.kubernetes.pod.name": "p",
                                                             "io.kubernetes.container.name": "c0"}}]})
    assert cgroup_log.identities(text) == {"a": ("ns", "p", "c0")}


# -- the command line -----------------------------------------------------------------------------------
def _fake_cluster(monkeypatch, nodes=("w1", "w2")):
    def answer(argv, timeout, stdin=None):
        args = [str(a) for a in argv][3:]
        if args[:1] == ["version"]:
            return json.dumps({"serverVersion": {"gitVersion": "v1.37.2"}})
        if args[:2] == ["get", "nodes"]:
            return json.dumps({"items": [{"metadata": {"name": n}, "status": {"nodeInfo": {
                "kubeletVersion": "v1.37.2", "architecture": "amd64"}}} for n in nodes]})
        raise AssertionError(f"unexpected kubectl {args}")
    monkeypatch.setattr(kube, "run", answer)


def test_a_cci_driver_on_a_cluster_is_refused_with_the_reason(monkeypatch, tmp_path, capsys):
    from cci_conformance.cli import main

    _fake_cluster(monkeypatch)
    (tmp_path / "kc").write_text("")
    code = main(["run", "--backend", "cluster", "--kubeconfig", str(tmp_path / "kc"), "--node", "w1",
                 "--report-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "CCI kubelet" in err and "w1 (v1.37.2)" in err and "--backend kind" in err


def test_an_unknown_node_is_refused_naming_the_cluster_s_nodes(monkeypatch, tmp_path, capsys):
    from cci_conformance.cli import main
    from cci_conformance.paths import DRA_REFERENCE_DIR

    _fake_cluster(monkeypatch)
    (tmp_path / "kc").write_text("")
    code = main(["run", "--driver", str(DRA_REFERENCE_DIR), "--backend", "cluster", "--kubeconfig",
                 str(tmp_path / "kc"), "--node", "w9", "--report-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "no node w9" in err and "w1, w2" in err and "--node" in err


def test_cluster_options_without_the_cluster_backend_are_refused(tmp_path, capsys):
    from cci_conformance.cli import main

    code = main(["run", "--backend", "embedded", "--node", "w1", "--report-dir", str(tmp_path / "out")])
    assert code == 2 and "--backend cluster" in capsys.readouterr().err


def test_the_sweep_deletes_claimed_pods_before_the_driver_and_only_by_the_run_label(monkeypatch, tmp_path):
    sent = []
    monkeypatch.setattr(kube, "run", lambda argv, timeout, stdin=None: sent.append([str(a) for a in argv]) or "")
    assert kube.Kube(tmp_path / "kc").sweep("ab12cd34") == []
    kinds = [argv[argv.index("delete") + 1] for argv in sent]
    assert kinds.index(next(k for k in kinds if "pods" in k)) < kinds.index(next(k for k in kinds if "daemonsets" in k))
    assert kinds.index("namespaces") < kinds.index(next(k for k in kinds if "daemonsets" in k))
    assert all(argv[argv.index("-l") + 1] == f"{kube.RUN_LABEL}=ab12cd34" for argv in sent)
