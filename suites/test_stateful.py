"""Random interleavings of claims, static and standard pods, removals and restarts; every invariant after every step."""

from __future__ import annotations

import random
import shlex
from dataclasses import dataclass

import pytest
from claimkit import (
    STANDARD_CPU_REQUEST_M,
    available_now,
    claim_pod,
    fmt,
    group,
    node_problems,
    params,
    refused_for_cpu_requests,
    standard_pod,
    static_pod,
    violations,
    withheld_of,
)
from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, get_state_machine_test, invariant, precondition, rule

from cci_conformance.certify.measuring import let_measurements_in
from cci_conformance.protocol.claims import parse_claim
from cci_conformance.protocol.semantics import GroupReply, check_admission, group_is_satisfiable

# A fixed number of random examples per topology (certify/settings.stateful_examples: the backend's default or
# --cci-stateful-examples), in rounds of ROUND, each round seeded from the previous one's seed: the verdict
# depends on the seed alone, never on how fast the machine is. A failure names its round's seed;
# `--hypothesis-seed SEED` (hypothesis's own pytest option) starts the chain there, so the failing round is
# replayed first (docs/certification.md).
ROUND = 10  # examples per round unless the run's pace says otherwise (certify/settings.STATEFUL_ROUND)
STEPS = 20
SEED_OPTION = "--hypothesis-seed"


@dataclass
class Live:
    """What the model expects of one admitted pod."""

    kind: str  # "cci" | "static" | "standard"
    parameters: dict | None
    groups: tuple = ()
    exclusive_flags: tuple = ()
    held: frozenset = frozenset()
    cpu_request_m: int = 0  # what the kubelet's resource fit counts (claims request no CPU)


def group_strategy(topology, caps: set[str]):
    t = topology.threads_per_core
    nodes = len(topology.node_cpus)
    devices = [d.bdf for d in topology.pci_devices if d.numa_node in topology.node_cpus]

    @st.composite
    def one(draw):
        excl = draw(st.booleans())  # EXCLUSIVE and SHARED are the base every driver serves (S1.11)
        cpu = ["EXCLUSIVE" if excl else "SHARED"]
        sib = draw(st.sampled_from(["", "PREFERRED", "REQUIRED"] + (["DENIED"] if excl else [])))
        if "core-siblings" not in caps:
            sib = ""
        count = draw(st.integers(1, 4))
        if sib == "REQUIRED":
            count = t * draw(st.integers(1, 2))
        if sib:
            cpu.append(f"CORE-SIBLING-{sib}")
        mems = ["NO-MEM-AFFINITY"]
        if "numa-bind" in caps:
            mems += ["NUMA-MEM-AFFINITY-BIND-REQUIRED", "NUMA-MEM-AFFINITY-BIND-PREFERRED"]
        if "numa-interleave" in caps:
            mems += ["NUMA-MEM-AFFINITY-INTERLEAVE-PREFERRED"]
            if count >= nodes:
                mems.append("NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED")
        mem = draw(st.sampled_from(mems))
        affinities = ["NO-DEVICE-AFFINITY"]
        if devices and "device-affinity" in caps:
            affinities += ["NUMA-DEVICE-AFFINITY-PREFERRED"]
            if mem != "NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED":
                affinities.append("NUMA-DEVICE-AFFINITY-REQUIRED")
        affinity = draw(st.sampled_from(affinities))
        device = draw(st.sampled_from(devices)) if affinity != "NO-DEVICE-AFFINITY" else None
        return group(count, *cpu, mem=mem, device=device, affinity=affinity)

    return one()


def claim_strategy(topology, caps: set[str]):
    groups = st.lists(group_strategy(topology, caps), min_size=1, max_size=2 if "groups" in caps else 1)
    return groups.map(lambda gs: params(*gs))


class NodeMachine(RuleBasedStateMachine):
    """The model: which pods live and what each holds; the node must agree on every public surface."""

    session = topology = caps = strict = None
    broken: list[str] = []
    static_ok = False
    examples = 0
    caught_at = 0  # the example in which the first invariant broke (figure `stateful examples` of a failure)

    def __init__(self):
        super().__init__()
        let_measurements_in()  # a spread run's latency fill elsewhere goes first, not after the whole test
        type(self).examples += 1
        self.live: dict[str, Live] = {}
        self.node_restarts = self.driver_restarts = 0

    # ---- steps ----
    @rule(data=st.data())
    def admit_claim(self, data):
        parameters = data.draw(claim_strategy(self.topology, self.caps))
        before = self.session.snapshot()
        result = self.session.create_pod(claim_pod(parameters))
        if not result.admitted:
            self.check(result.reason == "CCIAdmitError", f"{parameters}: {result.reason}: {result.message}")
            claim = parse_claim(parameters, self.topology, self.caps)
            if len(claim.groups) == 1:
                self.check(not group_is_satisfiable(self.topology, available_now(before), claim.groups[0]),
                           f"refused satisfiable {parameters} ({fmt(available_now(before))} free): {result.message}")
            return
        after = self.session.snapshot()
        problems = violations(parameters, self.topology, self.caps, available_now(before), result, after)
        self.check(not problems, lambda: f"{parameters}: {[str(p) for p in problems]}")
        a = result.containers[0]
        key = f"{a.pod_uid}/{a.container}"
        held = after.exclusive.get(key, frozenset())
        withheld = withheld_of(after, key)
        groups = a.groups or (a.cpus,)
        flags = tuple(bool(g) and frozenset(g) <= held - withheld for g in groups)
        self.live[a.pod_uid] = Live("cci", parameters, tuple(groups), flags, held)

    @precondition(lambda self: self.static_ok)
    @rule(cpus=st.integers(1, 3))
    def admit_static_pod(self, cpus):
        result = self.session.create_pod(static_pod(cpus))
        if result.admitted:
            self.live[result.containers[0].pod_uid] = Live("static", None, held=result.containers[0].cpus,
                                                           cpu_request_m=cpus * 1000)

    @rule()
    def admit_standard_pod(self):
        result = self.session.create_pod(standard_pod())
        if not result.admitted:
            # A real kubelet refuses a pod whose CPU requests do not fit what the live pods left (seen on kind:
            # static pods of 3 CPUs fill a 7-CPU node's requests); that is no driver's doing, any other refusal is.
            own = sum(live.cpu_request_m for live in self.live.values())
            why = refused_for_cpu_requests(result, own)
            self.check(not why, f"standard pod refused: {why}")
            return
        self.live[result.containers[0].pod_uid] = Live("standard", None, cpu_request_m=STANDARD_CPU_REQUEST_M)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def delete_pod(self, data):
        uid = data.draw(st.sampled_from(sorted(self.live)))
        self.session.delete_pod(uid)
        del self.live[uid]

    @precondition(lambda self: self.node_restarts == 0)
    @rule()
    def restart_node(self):
        self.node_restarts += 1
        self.session.restart_node(hard=True)

    @precondition(lambda self: self.driver_restarts == 0 and "restart-recovery" in self.caps)
    @rule()
    def restart_driver(self):
        self.driver_restarts += 1
        self.session.restart_driver(hard=True)

    # ---- invariants ----
    @invariant()
    def node_matches_the_model(self):
        snap = self.session.snapshot()  # one look at the node: the checks below all judge the same moment
        problems = node_problems(self.session, self.strict, snap)
        self.check(not problems, problems)
        self.check({c.pod_uid for c in snap.containers} == set(self.live), "the node's pods differ from the model's")
        for uid, live in self.live.items():
            self.check(snap.exclusive.get(f"{uid}/c0", frozenset()) == live.held, f"{uid} holds other CPUs than it got")

    @invariant()
    def every_live_grant_keeps_its_hard_rules(self):
        everyone = {uid: live.held for uid, live in self.live.items()}
        for uid, live in self.live.items():
            if live.kind != "cci":
                continue
            claim = parse_claim(live.parameters, self.topology, self.caps)
            replies = [GroupReply(frozenset(g), f) for g, f in zip(live.groups, live.exclusive_flags, strict=True)]
            own = frozenset().union(*live.groups) | live.held
            others = frozenset().union(*(h for u, h in everyone.items() if u != uid))
            problems = check_admission(claim, self.topology, own, replies, held_by_others=others)
            # a later exclusive grant may take CPUs a SHARED group runs on (S1.4, S3.3): only held CPUs are private
            problems = [p for p in problems if not (p.rule == "S2.9" and not claim.groups[p.group].exclusive)]
            self.check(not problems, f"live grant {uid}: {[str(p) for p in problems]}")

    def check(self, condition, message) -> None:
        """Assert, remembering the first broken invariant: a replay of a failing run on a live node may diverge."""
        if not condition:
            if not type(self).broken:  # hypothesis replays the failing example once more: count up to this one
                type(self).caught_at = type(self).examples
            type(self).broken.append(str(message() if callable(message) else message))
            raise AssertionError(type(self).broken[-1])

    def teardown(self):
        for uid in sorted(self.live, reverse=True):
            self.session.delete_pod(uid)


def first_seed(config) -> int:
    """The seed of the first round: hypothesis's --hypothesis-seed when given, else a fresh random one."""
    given = config.getoption(SEED_OPTION, None)
    if given is None:
        return random.SystemRandom().randrange(2**32)
    try:
        return int(given)
    except ValueError:
        pytest.fail(f"{SEED_OPTION}={given!r}: ACCT-010 needs an integer seed; fix: pass the number a failure "
                    f"printed, e.g. {SEED_OPTION}=1234", pytrace=False)


def run_rounds(machine, first: int, examples: int, per_round: int = ROUND) -> tuple[int, int]:
    """Run seeded rounds of the state machine until ``examples`` examples ran, in whole rounds of
    ``min(per_round, examples)`` (every round alike, so a round's seed replays it as its chain ran it);
    (examples run, rounds run). On a failure raises it with ``machine.failed_seed`` set to the seed that
    replays its round."""
    per_round = min(per_round, examples)
    options = settings(max_examples=per_round, stateful_step_count=STEPS, deadline=None, database=None,
                       suppress_health_check=list(HealthCheck), print_blob=False,
                       phases=(Phase.explicit, Phase.generate))  # no shrinking: a live node may not replay it
    round_seed, rounds = first, 0
    while machine.examples < examples:
        machine.failed_seed = round_seed
        seed(round_seed)(get_state_machine_test(machine, settings=options))()
        rounds += 1
        round_seed = random.Random(round_seed).randrange(2**32)  # the chain is fixed by the first seed
    machine.failed_seed = None
    return machine.examples, rounds


@pytest.mark.requirement("ACCT-010")
@pytest.mark.fresh_node  # restarts, kills or pauses: a node of its own (docs/certification.md)
@pytest.mark.long
def test_invariants_hold_under_random_interleavings(node, topology, driver_manifest, node_config, cci_settings,
                                                     request, record_figure, record_replay):
    """Every node invariant and every live grant's semantics MUST hold after every step of any interleaving."""
    session = node
    machine = type("Machine", (NodeMachine,), {
        "session": session, "topology": topology, "caps": set(driver_manifest.capabilities),
        "strict": node_config.strict_reservation,
        "static_ok": node_config.policy == "static", "broken": [], "examples": 0,
        "caught_at": 0})
    first = first_seed(request.config)
    record_figure("stateful first seed", first)  # report.json keeps it even when the run passes
    asked, per_round = cci_settings.stateful_pace(session.backend_name)
    record_figure("stateful examples asked", asked)
    try:
        run_rounds(machine, first, asked, per_round)
    except Exception as exc:
        given = [f"{opt} {shlex.quote(str(v))}" for opt in ("--cci-backend", "--cci-driver", "--cci-node-profile",
                                                                   "--cci-stateful-examples")
                 if (v := request.config.getoption(opt, None))]  # the replay runs where this run ran
        record_replay(f"pytest suites/test_stateful.py {' '.join([*given, ''])}--cci-topology {topology.name} "
                      f"{SEED_OPTION}={machine.failed_seed}")
        record_figure("stateful failing seed", machine.failed_seed)
        record_figure("stateful examples", machine.caught_at or machine.examples)  # up to the failing one
        # the first broken invariant (the violated rule, first and whole), not hypothesis's report of a replay
        # that diverged; the replay command is its own field of the report
        pytest.fail(f"{machine.broken[0] if machine.broken else exc} (hypothesis seed {machine.failed_seed})",
                    pytrace=False)
    record_figure("stateful examples", machine.examples)
    record_figure("stateful steps per example", STEPS)
