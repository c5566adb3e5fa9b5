"""The kind backend in alpha mode: the profile it takes, its kubelet flags, its ledger without the static store."""

from __future__ import annotations

import pytest

from cci_conformance.cpu_manager_state import CPUManagerState
from cci_conformance.cpuset import parse_cpulist
from cci_conformance.errors import ConfigError
from cci_conformance.kind.cci import ledger, node_view, run_cluster
from cci_conformance.node.profile import load_config
from cci_conformance.paths import PROJECT_ROOT

PROFILES = PROJECT_ROOT / "profiles" / "node"


@pytest.mark.parametrize("name", ["coexistence", "coexistence-strict", "alpha"])
def test_every_shipped_profile_runs_on_the_patched_kubelet(name):
    config = run_cluster.node_config(load_config(PROFILES / f"{name}.yaml", need_paths=False).raw)
    flags = run_cluster.kubelet_flags(config)
    assert flags["cpu-manager-reconcile-period"] == run_cluster.RECONCILE_PERIOD
    # the static policy gets --reserved-cpus from cluster.config.kubelet_args; the none policy only from here
    assert flags.get("reserved-cpus") == ("0" if name == "alpha" else None)


@pytest.mark.parametrize("profile", [
    {"mode": "coexistence", "cpuManagerPolicy": "static", "reservedSystemCPUs": "0", "cci": False},
    {"mode": "alpha", "cpuManagerPolicy": "none", "cci": False},
])
def test_a_profile_the_patched_kubelet_does_not_implement_is_refused_naming_the_modes(profile):
    with pytest.raises(ConfigError, match="coexistence .static policy. or alpha .none policy."):
        run_cluster.node_config(profile)


def _record(pod, exclusive="", withheld="", shared="", groups=()):
    return {"podUID": pod, "container": "c0", "exclusive": exclusive, "withheld": withheld, "shared": shared,
            "groups": [{"cpuset": g, "exclusive": bool(exclusive)} for g in groups], "claimUID": "cl-" + pod,
            "claimName": "claim-" + pod}


def _alpha_read(records, recorder=""):
    none = CPUManagerState("none", frozenset(), {})  # the none policy's file: no default set, no entries
    return node_view.NodeRead(b"", b"", none, {"mode": "alpha", "containers": records, "pending": []}, recorder,
                              parse_cpulist("0-15"), frozenset({0}), 1, 10, 0.0, True, (), "")


def test_in_alpha_the_grants_and_the_shared_pool_come_from_the_cci_records():
    read = _alpha_read([_record("a", exclusive="2,3", withheld="1", groups=("2,3",)),
                        _record("b", shared="4-7", groups=("4-7",))],
                       recorder='{"op":"create","id":"ida","cpus":"2-3"}\n'
                                '{"op":"create","id":"ids","cpus":"0,4-15","container-type":"container",'
                                '"sandbox-uid":"s","container-name":"c0"}\n')
    # alpha.go: held = exclusive + withheld; Shared = online - held, the reserved CPU 0 included
    assert read.assigned() == {1, 2, 3}
    assert read.shared_pool() == parse_cpulist("0,4-15")
    assert ledger.exclusive_map(read) == {"a/c0": {1, 2, 3}}  # a SHARED-only container holds nothing
    assert ledger.effective(read.cci["containers"][0], read) == {2, 3}
    assert ledger.effective(read.cci["containers"][1], read) == {4, 5, 6, 7}
    plain = {"metadata": {"uid": "s", "name": "q", "namespace": "n"}, "spec": {"containers": [{"name": "c0"}]},
             "status": {"containerStatuses": [
        {"name": "c0", "containerID": "containerd://ids", "state": {"running": {}}}]}}
    (state,) = ledger.containers_of([plain], read)
    # a Guaranteed pod gets no CPUs of its own under the none policy: it runs on the shared pool
    assert (state.source, state.store_cpus, state.runtime_cpus, state.exclusive) == \
        ("shared", parse_cpulist("0,4-15"), parse_cpulist("0,4-15"), False)


def test_without_a_reserved_cpus_flag_only_the_static_policy_is_an_error():
    flags = 'KUBELET_KUBEADM_ARGS="--cpu-manager-policy=none --node-ip=172.18.0.3"'
    assert node_view._reserved(flags, CPUManagerState("none", frozenset(), {})) == frozenset()
    with pytest.raises(Exception, match="no --reserved-cpus"):
        node_view._reserved(flags, CPUManagerState("static", frozenset(), {}))
    assert node_view._reserved(flags + " --reserved-cpus=0,1", CPUManagerState("static", frozenset(), {})) == {0, 1}
