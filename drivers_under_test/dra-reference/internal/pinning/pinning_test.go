package pinning_test

import (
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/checkpoint"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/fixture"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/mutant"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/pinning"
)

type node struct {
	t      *testing.T
	e      *pinning.Engine
	store  checkpoint.Store
	pushed [][]pinning.Update
}

func newNode(t *testing.T, machine string, reserved cpuset.CPUSet, mut mutant.Name) *node {
	t.Helper()
	n := &node{t: t, store: checkpoint.Store{Dir: t.TempDir(), Driver: "d.example"}}
	n.start(machine, reserved, mut)
	return n
}

// start (re)starts the engine on the node's state dir, as a driver restart does.
func (n *node) start(machine string, reserved cpuset.CPUSet, mut mutant.Name) {
	n.t.Helper()
	e, err := pinning.New(fixture.Machine(n.t, machine), reserved, n.store, mut)
	if err != nil {
		n.t.Fatal(err)
	}
	e.SetPusher(func(u []pinning.Update) error { n.pushed = append(n.pushed, u); return nil })
	n.e = e
}

func individual(uid string, cpus ...int) pinning.Request {
	return pinning.Request{UID: uid, Namespace: "ns", Name: "claim-" + uid, Pods: []string{"pod-" + uid}, CPUs: cpuset.New(cpus...)}
}

func (n *node) grant(req pinning.Request) cpuset.CPUSet {
	n.t.Helper()
	cpus, err := n.e.Grant(req)
	if err != nil {
		n.t.Fatalf("grant %s: %v", req.UID, err)
	}
	return cpus
}

func TestSharedPoolIsOfferedMinusGrants(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(0), mutant.None)
	if got := n.e.SharedPool().String(); got != "1-7" {
		t.Fatalf("pool %s, want 1-7 (online minus reserved 0)", got)
	}
	n.grant(individual("a", 1, 5))
	n.grant(individual("b", 2))
	if got := n.e.SharedPool().String(); got != "3-4,6-7" {
		t.Errorf("pool %s after grants 1,5 and 2, want 3-4,6-7", got)
	}
	if err := n.e.Release("a"); err != nil {
		t.Fatal(err)
	}
	if got := n.e.SharedPool().String(); got != "1,3-7" {
		t.Errorf("pool %s after releasing 1,5, want 1,3-7", got)
	}
	if err := n.e.Release("never-prepared"); err != nil {
		t.Errorf("releasing an unknown claim: %v (must be idempotent)", err)
	}
}

func TestPrepareIsIdempotent(t *testing.T) {
	n := newNode(t, "server-2s8c-smt2-intel", cpuset.New(), mutant.None)
	share := pinning.Request{UID: "g", Namespace: "ns", Name: "g", Shares: []pinning.Share{{Node: 1, Count: 4}}}
	first := n.grant(share)
	again := n.grant(share)
	if !first.Equals(again) || first.Size() != 4 || !first.IsSubsetOf(fixture.Machine(t, "server-2s8c-smt2-intel").Nodes[1]) {
		t.Errorf("first %s, again %s: want the same 4 CPUs of node 1 twice", first, again)
	}
	if len(n.e.Claims()) != 1 {
		t.Errorf("%d claims held, want 1", len(n.e.Claims()))
	}
}

func TestDoubleAllocationRefused(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(), mutant.None)
	n.grant(individual("a", 0, 4))
	_, err := n.e.Grant(individual("b", 4, 1))
	if err == nil || !strings.Contains(err.Error(), "double allocation") || !strings.Contains(err.Error(), "ns/claim-a") ||
		!strings.Contains(err.Error(), "CPUs 4") {
		t.Fatalf("error %v should name the double allocation, CPU 4 and claim ns/claim-a", err)
	}
	if _, held := n.e.Held("b"); held {
		t.Error("the refused claim is held")
	}
}

func TestUnofferedCPUsRefused(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(0), mutant.None)
	if _, err := n.e.Grant(individual("a", 0)); err == nil || !strings.Contains(err.Error(), "not offered") {
		t.Errorf("reserved CPU 0 granted: %v", err)
	}
}

func TestEmptySharedPoolRefused(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(), mutant.None)
	n.grant(individual("a", 0, 1, 2, 3, 4, 5, 6))
	_, err := n.e.Grant(individual("b", 7))
	if err == nil || !strings.Contains(err.Error(), "shared pool empty") {
		t.Fatalf("the last CPU was granted: %v", err)
	}
	if got := n.e.SharedPool().String(); got != "7" {
		t.Errorf("pool %s, want 7", got)
	}
}

func TestClaimForTwoPodsRefused(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(), mutant.None)
	req := individual("a", 1)
	req.Pods = []string{"p1", "p2"}
	if _, err := n.e.Grant(req); err == nil || !strings.Contains(err.Error(), "one pod") {
		t.Errorf("a claim reserved for two pods was granted: %v", err)
	}
}

func TestGroupedShareFromItsNode(t *testing.T) {
	n := newNode(t, "smt4-2s", cpuset.New(), mutant.None)
	m := fixture.Machine(t, "smt4-2s")
	a := n.grant(pinning.Request{UID: "a", Shares: []pinning.Share{{Node: 1, Count: 4}}})
	b := n.grant(pinning.Request{UID: "b", Shares: []pinning.Share{{Node: 1, Count: 4}}})
	if !a.IsSubsetOf(m.Nodes[1]) || !b.IsSubsetOf(m.Nodes[1]) || !a.Intersection(b).IsEmpty() {
		t.Errorf("shares %s and %s: want disjoint CPUs of node 1", a, b)
	}
	if !a.Equals(m.CPUs[a.List()[0]].Siblings) || !b.Equals(m.CPUs[b.List()[0]].Siblings) {
		t.Errorf("shares %s and %s should each be one whole SMT-4 core", a, b)
	}
	if _, err := n.e.Grant(pinning.Request{UID: "c", Shares: []pinning.Share{{Node: 1, Count: 25}}}); err == nil {
		t.Error("25 CPUs of node 1 granted with 24 free")
	}
}

func TestRestartKeepsGrants(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(), mutant.None)
	n.grant(individual("a", 1, 5))
	n.start("laptop-1s4c-smt2", cpuset.New(), mutant.None)
	if cpus, ok := n.e.Held("a"); !ok || cpus.String() != "1,5" {
		t.Fatalf("after restart claim a holds %s (%v), want 1,5", cpus, ok)
	}
	if _, err := n.e.Grant(individual("b", 5)); err == nil {
		t.Error("after restart a granted CPU was granted again")
	}
	if got := n.e.SharedPool().String(); got != "0,2-4,6-7" {
		t.Errorf("pool after restart %s", got)
	}
}

func TestRestartRefusesACheckpointTheMachineCannotHold(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(), mutant.None)
	n.grant(individual("a", 0, 4))
	_, err := pinning.New(fixture.Machine(t, "laptop-1s4c-smt2"), cpuset.New(0), n.store, mutant.None)
	if err == nil || !strings.Contains(err.Error(), "not offered") || !strings.Contains(err.Error(), n.store.Path()) {
		t.Errorf("a checkpoint holding now-reserved CPU 0 was accepted: %v", err)
	}
}

func TestMutantForgetsOnRestart(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(), mutant.None)
	n.grant(individual("a", 1, 5))
	n.start("laptop-1s4c-smt2", cpuset.New(), mutant.ForgetsOnRestart)
	if _, ok := n.e.Held("a"); ok {
		t.Fatal("the mutant remembered")
	}
	if _, err := n.e.Grant(individual("b", 5)); err != nil {
		t.Errorf("the mutant should hand CPU 5 out again: %v", err)
	}
}

func TestMutantOverlappingGrants(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(), mutant.OverlappingGrants)
	n.grant(individual("a", 0, 4))
	if _, err := n.e.Grant(individual("b", 4)); err != nil {
		t.Errorf("the mutant refused the double allocation: %v", err)
	}
	g := newNode(t, "server-2s8c-smt2-intel", cpuset.New(), mutant.OverlappingGrants)
	a := g.grant(pinning.Request{UID: "a", Shares: []pinning.Share{{Node: 0, Count: 2}}})
	b := g.grant(pinning.Request{UID: "b", Shares: []pinning.Share{{Node: 0, Count: 2}}})
	if a.Intersection(b).IsEmpty() {
		t.Errorf("the mutant's grouped shares %s and %s are disjoint", a, b)
	}
}

func TestMutantSharedKeepsGranted(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(), mutant.SharedKeepsGranted)
	n.grant(individual("a", 1, 5))
	if !n.e.SharedPool().Contains(1) {
		t.Errorf("the mutant's pool %s lacks granted CPU 1", n.e.SharedPool())
	}
}

func TestMutantEmptyPoolEverything(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(), mutant.EmptyPoolEverything)
	n.grant(individual("a", 0, 1, 2, 3, 4, 5, 6, 7))
	if got := n.e.SharedPool().String(); got != "0-7" {
		t.Errorf("the mutant's pool %s, want every CPU", got)
	}
}

func TestMutantSecondPodAllowed(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(), mutant.SecondPodAllowed)
	req := individual("a", 1)
	req.Pods = []string{"p1", "p2"}
	if _, err := n.e.Grant(req); err != nil {
		t.Errorf("the mutant refused a claim for two pods: %v", err)
	}
}
