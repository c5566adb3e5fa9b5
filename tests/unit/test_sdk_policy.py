"""The SDK's Policy bookkeeping in-process: canonical snapshots, rollback tokens, and one-method mutants."""

from __future__ import annotations

import json

from cci_conformance.driver_sdk.policy import AdmitCall, Policy
from cci_conformance.protocol.claims import parse_claim
from cci_conformance.protocol.semantics import GroupReply, check_admission
from cci_conformance.topology import library
from drivers_under_test.reference.policy import ReferencePolicy

T = library.load("server-2s8c-smt2-intel")


def call(pod, claim, available=None):
    return AdmitCall("ns", f"uid-{pod}", "c", T.online_cpus if available is None else available, pod, "main",
                     json.dumps(claim))


def test_snapshot_text_is_the_canonical_json_of_snapshot():
    p = ReferencePolicy(T)
    for i in range(5):
        p.admit(call(f"p{i}", {"cores": [str(i + 1)], "cpu attributes": [["EXCLUSIVE"]]}))
    p.add("p1", "main", "cid-1", "/cg")
    assert p.snapshot_text() == json.dumps(p.snapshot(), sort_keys=True, separators=(",", ":"))
    fresh = ReferencePolicy(T)
    fresh.restore(json.loads(p.snapshot_text()))
    assert fresh.snapshot() == p.snapshot() and fresh.withheld_now() == p.withheld_now()


def test_rollback_undoes_a_call():
    p = ReferencePolicy(T)
    p.admit(call("a", {"cores": ["2"], "cpu attributes": [["EXCLUSIVE"]]}))
    token = p.checkpoint()
    p.admit(call("b", {"cores": ["2"], "cpu attributes": [["EXCLUSIVE"]]}))
    assert p.changed_since(token)
    p.rollback(token)
    assert list(p.admissions) == [("a", "main")] and not p.changed_since(token)
    assert p.withheld_now() == p._withheld


def test_a_mutant_is_one_overridden_method_and_the_checker_catches_it():
    class IgnoresOwnGrants(ReferencePolicy):
        def usable_cpus(self, call):  # breaks S1.4/S2.9: trusts a stale availableCpus
            return call.available & self.topology.online_cpus

    claim_params = {"cores": ["4"], "cpu attributes": [["EXCLUSIVE"]]}
    claim = parse_claim(claim_params, T)
    for cls, expect_violation in ((ReferencePolicy, False), (IgnoresOwnGrants, True)):
        p: Policy = cls(T)
        first = p.admit(call("a", claim_params))
        second = p.admit(call("b", claim_params))  # the node (wrongly) still offers every CPU
        found = check_admission(claim, T, T.online_cpus, [GroupReply(g.cpus, g.exclusive) for g in second.groups],
                                held_by_others=first.withheld)
        assert bool(found) is expect_violation, found
