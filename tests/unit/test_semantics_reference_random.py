"""Seeded random claim sequences against the reference policy in-process, on every library topology:
every grant passes the independent checker (which reads the parameters itself) and no satisfiable
one-group claim is refused."""

from __future__ import annotations

import random

import pytest

from cci_conformance.driver_sdk.policy import AdmitCall, PolicyError
from cci_conformance.protocol.claims import ClaimError, claim_json, parse_claim
from cci_conformance.protocol.semantics import GroupReply, check_admission, group_is_satisfiable, withheld_cpus
from cci_conformance.topology import library
from drivers_under_test.reference.policy import ReferencePolicy

CPU = [["EXCLUSIVE"], ["SHARED"], ["EXCLUSIVE", "CORE-SIBLING-REQUIRED"], ["EXCLUSIVE", "CORE-SIBLING-DENIED"],
       ["EXCLUSIVE", "CORE-SIBLING-PREFERRED"], ["SHARED", "CORE-SIBLING-REQUIRED"]]
MEM = ["NO-MEM-AFFINITY", "NUMA-MEM-AFFINITY-BIND-REQUIRED", "NUMA-MEM-AFFINITY-BIND-PREFERRED",
       "NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED", "NUMA-MEM-AFFINITY-INTERLEAVE-PREFERRED"]


@pytest.mark.parametrize("name", library.names())
def test_random_claims(name):
    t = library.load(name)
    rng = random.Random(name)
    policy = ReferencePolicy(t)
    devices = [d.bdf for d in t.pci_devices if d.numa_node in t.node_cpus]
    live: dict[str, frozenset[int]] = {}
    admitted = refused = 0
    for step in range(150):
        if live and rng.random() < 0.35:
            uid = rng.choice(list(live))
            policy.remove("ns", uid, "c", "")
            del live[uid]
            continue
        groups = []
        for _ in range(rng.choice([1, 1, 1, 2])):
            g = {"cores": rng.choice([1, 2, 3, 4, 6, 8]), "cpu": rng.choice(CPU), "mem": rng.choice(MEM)}
            if devices and rng.random() < 0.3:
                g["device"] = {"affinity": rng.choice(["NUMA-DEVICE-AFFINITY-REQUIRED",
                                                       "NUMA-DEVICE-AFFINITY-PREFERRED"]),
                               "device": rng.choice(devices)}
            groups.append(g)
        params = claim_json(groups)
        try:
            claim = parse_claim(params, t, policy.capabilities)
        except ClaimError:
            continue
        held = frozenset().union(*live.values())
        available = t.online_cpus - held
        uid = f"u{step}"
        try:
            a = policy.admit(AdmitCall("ns", uid, "c", available, f"p{step}", "main", params))
        except PolicyError:
            refused += 1
            if len(claim.groups) == 1:
                assert not group_is_satisfiable(t, available, params), f"refused a satisfiable {params}"
            continue
        replies = [GroupReply(g.cpus, g.exclusive) for g in a.groups]
        found = check_admission(params, t, available, replies, rset_cpuset=a.cpuset, rset_exclusive=a.exclusive,
                                held_by_others=held)
        assert not found, f"{params}: " + "; ".join(map(str, found))
        live[uid] = withheld_cpus(t, params, replies)
        assert live[uid] == a.withheld  # the driver withholds exactly what the spec says
        admitted += 1
    assert admitted > 20
