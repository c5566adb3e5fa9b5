package pinning_test

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/fixture"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/kubeletstate"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/mutant"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/pinning"
)

// staticNode is laptop-1s4c-smt2 (CPUs 0-7, cores {0,4} {1,5} {2,6} {3,7}) with CPU 0 reserved, beside a
// static-policy kubelet whose checkpoint pins the given entries (pod UID -> container -> cpulist).
func staticNode(t *testing.T, mut mutant.Name, entries map[string]map[string]string) (*node, string) {
	t.Helper()
	n := newNode(t, "laptop-1s4c-smt2", cpuset.New(0), mut)
	path := filepath.Join(t.TempDir(), "cpu_manager_state")
	pin(t, path, entries)
	n.e.SetKubeletState(&kubeletstate.File{Path: path})
	return n, path
}

func pin(t *testing.T, path string, entries map[string]map[string]string) {
	t.Helper()
	fixture.WriteCPUManagerState(t, path, "static", "0,2-4,6-7", entries)
}

var guaranteed = map[string]map[string]string{"pod-g": {"c0": "1,5"}}

func TestClaimOnKubeletPinnedCPUsRefused(t *testing.T) {
	n, path := staticNode(t, mutant.None, guaranteed)
	_, err := n.e.Grant(individual("a", 2, 5))
	for _, want := range []string{"CPUs 5", "pod pod-g container c0", path, "pinned by the kubelet's static CPU manager policy"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("a claim on pinned CPU 5: error %v, want it to name %q", err, want)
		}
	}
	if _, held := n.e.Held("a"); held {
		t.Error("the refused claim is held")
	}
	n.grant(individual("b", 2, 6))
	// Grouped claims pick their CPUs: never pinned ones.
	g := n.grant(pinning.Request{UID: "g", Shares: []pinning.Share{{Node: 0, Count: 2}}})
	if !g.Intersection(cpuset.New(1, 5)).IsEmpty() {
		t.Errorf("grouped share %s took CPUs the kubelet pinned", g)
	}
	// Once the kubelet dropped the pod's pins (the pod is gone), the kubelet's retry succeeds.
	pin(t, path, nil)
	n.grant(individual("a", 1, 5))
}

func TestUnreadableKubeletStateRefusesClaims(t *testing.T) {
	n, path := staticNode(t, mutant.None, guaranteed)
	fixture.WriteRaw(t, path, []byte("{garbage"))
	if _, err := n.e.Grant(individual("a", 3)); err == nil || !strings.Contains(err.Error(), path) ||
		!strings.Contains(err.Error(), "cannot be read") {
		t.Fatalf("a claim prepared while %s is garbage: %v", path, err)
	}
	// The pins of the last good read still place the containers: never "nothing pinned".
	if got := n.e.SharedPool().String(); got != "2-4,6-7" {
		t.Errorf("pool %s while the state is unreadable, want 2-4,6-7 (the last good pins kept out)", got)
	}
	pin(t, path, guaranteed)
	n.grant(individual("a", 3))
}

func TestSharedPoolExcludesKubeletPinnedCPUs(t *testing.T) {
	n, _ := staticNode(t, mutant.None, guaranteed)
	if got := n.e.SharedPool().String(); got != "2-4,6-7" {
		t.Fatalf("pool %s, want 2-4,6-7 (online - reserved 0 - pinned 1,5)", got)
	}
	n.grant(individual("a", 2, 6))
	if got := n.e.SharedPool().String(); got != "3-4,7" {
		t.Errorf("pool %s after grant 2,6, want 3-4,7", got)
	}
}

// The pins never empty the pool: a claim of the last unpinned CPU is refused (the engine's empty-pool
// rule), and when the kubelet pins the last ones after a grant the pool is kept without the pins.
func TestKubeletPinsNeverEmptyTheSharedPool(t *testing.T) {
	n, path := staticNode(t, mutant.None, map[string]map[string]string{"pod-g": {"c0": "1-3,5-7"}})
	_, err := n.e.Grant(individual("a", 4))
	if err == nil || !strings.Contains(err.Error(), "shared pool empty") || !strings.Contains(err.Error(), "1-3,5-7") {
		t.Fatalf("the last unpinned CPU was granted: %v", err)
	}
	pin(t, path, nil)
	n.grant(individual("a", 4))
	pin(t, path, map[string]map[string]string{"pod-g": {"c0": "1-3,5-7"}})
	n.e.RefreshKubeletPins()
	if got := n.e.SharedPool().String(); got != "1-3,5-7" {
		t.Errorf("pool %s once the kubelet pinned every CPU left; want 1-3,5-7 (not empty, still without grant 4)", got)
	}
}

func kubeletPinned(id, pod, name, cpus string) pinning.Container {
	c := pinning.Container{ID: id, PodUID: pod, ContainerName: name, Name: "ns/" + pod + "/" + name}
	c.CPUs, _ = cpuset.Parse(cpus)
	return c
}

func TestKubeletPinnedContainerLeftAlone(t *testing.T) {
	n, _ := staticNode(t, mutant.None, guaranteed)
	cpus, _ := n.create(kubeletPinned("g", "pod-g", "c0", "1,5"))
	if !cpus.IsEmpty() {
		t.Fatalf("the kubelet-pinned container was given %s; it must be left alone", cpus)
	}
	// Another container of the same pod that the kubelet did not pin is a shared one.
	if cpus, _ := n.create(kubeletPinned("g2", "pod-g", "sidecar", "")); cpus.String() != "2-4,6-7" {
		t.Errorf("an unpinned container of the pod got %s, want the pool 2-4,6-7", cpus)
	}
	n.grant(individual("a", 2, 6))
	if _, moved := lastPush(n)["g"]; moved {
		t.Errorf("the grant moved the kubelet-pinned container: %v", lastPush(n))
	}
	updates := n.e.Synchronize([]pinning.Container{kubeletPinned("g", "pod-g", "c0", "1,5")})
	if len(updates) != 0 {
		t.Errorf("sync updated the kubelet-pinned container: %v", updates)
	}
}

// A Guaranteed pod admitted after a shared container started takes CPUs of its pool: the next check of
// the checkpoint moves the shared container off them, and back once the pins are gone.
func TestLateKubeletPinMovesSharedContainers(t *testing.T) {
	n, path := staticNode(t, mutant.None, nil)
	if cpus, _ := n.create(shared("s1")); cpus.String() != "1-7" {
		t.Fatalf("shared container got %s, want 1-7", cpus)
	}
	pin(t, path, guaranteed)
	n.e.RefreshKubeletPins()
	if got := lastPush(n)["s1"]; got != "2-4,6-7" {
		t.Fatalf("after the kubelet pinned 1,5, s1 was updated to %q, want 2-4,6-7", got)
	}
	pushes := len(n.pushed)
	n.e.RefreshKubeletPins()
	if len(n.pushed) != pushes {
		t.Errorf("an unchanged checkpoint pushed again: %v", n.pushed[pushes:])
	}
	pin(t, path, nil)
	n.e.RefreshKubeletPins()
	if got := lastPush(n)["s1"]; got != "1-7" {
		t.Errorf("after the pins were dropped, s1 was updated to %q, want 1-7", got)
	}
}

func TestMutantIgnoresKubeletPins(t *testing.T) {
	n, _ := staticNode(t, mutant.IgnoresKubeletPins, guaranteed)
	if _, err := n.e.Grant(individual("a", 5)); err != nil {
		t.Errorf("the mutant refused pinned CPU 5: %v", err)
	}
	if !n.e.SharedPool().Contains(1) {
		t.Errorf("the mutant's pool %s lacks pinned CPU 1", n.e.SharedPool())
	}
	if cpus, _ := n.create(kubeletPinned("g", "pod-g", "c0", "1,5")); cpus.IsEmpty() {
		t.Error("the mutant left the kubelet-pinned container alone")
	}
}
