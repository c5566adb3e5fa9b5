package pinning_test

import (
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/mutant"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/pinning"
)

func shared(id string) pinning.Container {
	return pinning.Container{ID: id, PodUID: "pod-" + id, Name: id}
}

func claimed(id, pod string, claims ...string) pinning.Container {
	return pinning.Container{ID: id, PodUID: pod, Name: id, Claims: claims}
}

func (n *node) create(c pinning.Container) (cpuset.CPUSet, []pinning.Update) {
	n.t.Helper()
	cpus, updates, err := n.e.Create(c)
	if err != nil {
		n.t.Fatalf("create %s: %v", c.ID, err)
	}
	return cpus, updates
}

func lastPush(n *node) map[string]string {
	out := map[string]string{}
	if len(n.pushed) > 0 {
		for _, u := range n.pushed[len(n.pushed)-1] {
			out[u.ContainerID] = u.CPUs.String()
		}
	}
	return out
}

func TestClaimedAndSharedContainers(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(0), mutant.None)
	if cpus, _ := n.create(shared("s1")); cpus.String() != "1-7" {
		t.Fatalf("shared container got %s, want the pool 1-7", cpus)
	}
	n.grant(individual("a", 1, 5))
	// The grant moved the running shared container off the granted CPUs at once.
	if got := lastPush(n)["s1"]; got != "2-4,6-7" {
		t.Errorf("after the grant s1 was updated to %q, want 2-4,6-7", got)
	}
	cpus, updates := n.create(claimed("c1", "pod-a", "a"))
	if cpus.String() != "1,5" || len(updates) != 0 {
		t.Errorf("claimed container got %s with updates %v, want 1,5 and none", cpus, updates)
	}
	// A second container of the same pod naming the same claim shares its CPUs.
	if cpus, _ := n.create(claimed("c2", "pod-a", "a")); cpus.String() != "1,5" {
		t.Errorf("second container of the pod got %s, want 1,5", cpus)
	}
	if err := n.e.Release("a"); err != nil {
		t.Fatal(err)
	}
	if got := lastPush(n)["s1"]; got != "1-7" {
		t.Errorf("after the release s1 was updated to %q, want 1-7", got)
	}
}

func TestContainerOfASecondPodRefused(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(), mutant.None)
	n.grant(individual("a", 1, 5))
	n.create(claimed("c1", "pod-a", "a"))
	_, _, err := n.e.Create(claimed("x1", "pod-other", "a"))
	if err == nil || !strings.Contains(err.Error(), "one pod only") {
		t.Errorf("a second pod's container got the claim: %v", err)
	}
}

func TestContainerWithUnknownClaimRefused(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(), mutant.None)
	if _, _, err := n.e.Create(claimed("c1", "pod-a", "nope")); err == nil || !strings.Contains(err.Error(), "not prepared") {
		t.Errorf("a container with an unprepared claim was pinned: %v", err)
	}
}

func TestClaimPreparedBeforeItsPodIsKnownGoesToTheFirstPod(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(), mutant.None)
	req := individual("a", 2)
	req.Pods = nil
	n.grant(req)
	n.create(claimed("c1", "pod-1", "a"))
	if _, _, err := n.e.Create(claimed("c2", "pod-2", "a")); err == nil {
		t.Error("the claim went to a second pod")
	}
	n.start("laptop-1s4c-smt2", cpuset.New(), mutant.None)
	if claims := n.e.Claims(); len(claims[0].Pods) != 1 || claims[0].Pods[0] != "pod-1" {
		t.Errorf("the adopted pod was not checkpointed: %+v", claims)
	}
}

// A claimed container's stop keeps the claim's CPUs out of the pool until unprepare (#235).
func TestStopKeepsTheGrant(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(), mutant.None)
	n.create(shared("s1"))
	n.grant(individual("a", 1, 5))
	n.create(claimed("c1", "pod-a", "a"))
	if updates := n.e.Stop("c1"); len(updates) != 0 {
		t.Errorf("stopping the claimed container updated %v", updates)
	}
	if n.e.SharedPool().Contains(1) {
		t.Errorf("pool %s took back a CPU of a prepared claim", n.e.SharedPool())
	}
}

func TestMutantReleasesOnStop(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(), mutant.ReleasesOnStop)
	n.create(shared("s1"))
	n.grant(individual("a", 1, 5))
	n.create(claimed("c1", "pod-a", "a"))
	updates := n.e.Stop("c1")
	if !n.e.SharedPool().Contains(1) || len(updates) != 1 || !updates[0].CPUs.Contains(5) {
		t.Errorf("the mutant kept the CPUs: pool %s, updates %v", n.e.SharedPool(), updates)
	}
}

// After a restart the runtime's list rebuilds the containers; one created while the driver was away
// (no cpuset from the driver: every CPU) is moved to the pool.
func TestSynchronizeMovesContainersCreatedWhileDown(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(), mutant.None)
	n.grant(individual("a", 1, 5))
	n.start("laptop-1s4c-smt2", cpuset.New(), mutant.None)
	c1 := claimed("c1", "pod-a", "a")
	c1.CPUs = cpuset.New(1, 5)
	late := shared("late")
	late.CPUs = cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)
	unknown := shared("never-pinned") // no cpuset at all in its spec
	updates := n.e.Synchronize([]pinning.Container{c1, late, unknown})
	got := map[string]string{}
	for _, u := range updates {
		got[u.ContainerID] = u.CPUs.String()
	}
	if len(got) != 2 || got["late"] != "0,2-4,6-7" || got["never-pinned"] != "0,2-4,6-7" {
		t.Errorf("sync updates %v: want late and never-pinned moved to 0,2-4,6-7, c1 untouched", got)
	}
}

func TestMutantNoSyncOnConnect(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(), mutant.NoSyncOnConnect)
	n.grant(individual("a", 1, 5))
	late := shared("late")
	late.CPUs = cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)
	if updates := n.e.Synchronize([]pinning.Container{late}); len(updates) != 0 {
		t.Errorf("the mutant updated %v on connect", updates)
	}
	// nor later: it never learnt the container, so a change of the pool does not move it either
	n.grant(individual("b", 2, 6))
	if got, moved := lastPush(n)["late"]; moved {
		t.Errorf("the mutant moved the container it did not sync to %s at the next grant", got)
	}
}

func TestMutantOverlappingGrantsPinsACPUOfAnotherClaim(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(), mutant.OverlappingGrants)
	n.grant(individual("a", 1, 5))
	if cpus, _ := n.create(claimed("c1", "pod-a", "a")); cpus.String() != "1,5" {
		t.Errorf("the only claimed container got %s, want its claim 1,5", cpus)
	}
	n.grant(individual("b", 2, 6))
	if cpus, _ := n.create(claimed("c2", "pod-b", "b")); cpus.String() != "1-2,6" {
		t.Errorf("the second claimed container got %s, want 2,6 plus a's CPU 1 (the fault)", cpus)
	}
}

func TestFailedPushIsSentAgain(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(), mutant.None)
	n.create(shared("s1"))
	n.e.SetPusher(func([]pinning.Update) error { return errTest })
	n.grant(individual("a", 1))
	if known := n.e.Containers()["s1"]; !known.IsEmpty() {
		t.Errorf("after a failed push s1 is believed to run on %s; its cpuset is unknown", known)
	}
	n.e.SetPusher(func(u []pinning.Update) error { n.pushed = append(n.pushed, u); return nil })
	n.grant(individual("b", 2))
	if got := lastPush(n)["s1"]; got != "0,3-7" {
		t.Errorf("after a failed push s1 was updated to %q, want 0,3-7", got)
	}
}

type testError string

func (e testError) Error() string { return string(e) }

const errTest = testError("runtime unavailable")

func TestMutantShortClaim(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(0), mutant.ShortClaim)
	n.grant(individual("a", 1, 5))
	if cpus, _ := n.create(claimed("c1", "pod-a", "a")); cpus.String() != "1" {
		t.Errorf("short-claim pinned the container to %s, want 1 (its claim 1,5 less the highest)", cpus)
	}
	if pool := n.e.SharedPool(); pool.Contains(5) {
		t.Errorf("the CPU it left idle is in the pool %s; the fault keeps it granted", pool)
	}
}

func TestMutantFirstContainerOnly(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(0), mutant.FirstContainerOnly)
	n.grant(individual("a", 1, 5))
	first := claimed("c1", "pod-a", "a")
	first.ContainerName = "c0"
	second := claimed("c2", "pod-a", "a")
	second.ContainerName = "c1"
	if cpus, _ := n.create(first); cpus.String() != "1,5" {
		t.Errorf("the first container got %s, want its claim 1,5", cpus)
	}
	if cpus, _ := n.create(second); cpus.String() != "2-4,6-7" {
		t.Errorf("the second container of the pod got %s, want the pool 2-4,6-7 (the fault)", cpus)
	}
}

func TestMutantResetsOnKubeletRestart(t *testing.T) {
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(0), mutant.ResetsOnKubeletRestart)
	n.grant(individual("a", 1, 5))
	n.create(claimed("c1", "pod-a", "a"))
	n.e.ForgetGrants()
	if got := lastPush(n)["c1"]; got != "1-7" {
		t.Errorf("after the reset c1 was moved to %q, want the whole pool 1-7 (the fault)", got)
	}
	if _, held := n.e.Held("a"); held {
		t.Error("claim a is still held after ForgetGrants")
	}
}
