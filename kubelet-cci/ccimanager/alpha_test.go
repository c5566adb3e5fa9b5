package ccimanager

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	cciv1alpha1 "github.com/cci-conformance/cci-conformance/api/cci/v1alpha1"
	"k8s.io/utils/cpuset"
)

// The alpha mode (policy none + CCI, docs/spec.md S3.1): the CCI manager keeps its grants itself.

func TestAlphaOffersOnlineMinusReservedMinusHeldAndKeepsTheGrantItself(t *testing.T) {
	r := newAlphaRig(t)
	r.drv.reply = grantAll("1-2")
	if _, err := r.m.Admit(context.Background(), request("p1", "c", `{"cores":["2"]}`)); err != nil {
		t.Fatal(err)
	}
	r.drv.reply = grantAll("3")
	if _, err := r.m.Admit(context.Background(), request("p2", "c", `{"cores":["1"]}`)); err != nil {
		t.Fatal(err)
	}
	// availableCpus = online - reserved - held (S3.2): CPU 0 never, p1's 1-2 not to p2
	if got := []string{r.drv.admits[0].AvailableCpus, r.drv.admits[1].AvailableCpus}; got[0] != "1-7" || got[1] != "3-7" {
		t.Errorf("availableCpus = %v, want [1-7 3-7]", got)
	}
	if got := r.own.Available(); !got.Equals(mustParse("4-7")) {
		t.Errorf("available = %v, want 4-7", got)
	}
	// the shared pool keeps the reserved CPU (the none policy takes no strict-cpu-reservation)
	if got := r.own.Shared(); !got.Equals(mustParse("0,4-7")) {
		t.Errorf("shared pool = %v, want 0,4-7", got)
	}
	// cci_manager_state records the mode, and it is the grants' only record (cpu_manager_state is the none file)
	cp := NewCheckpoint(r.store.path, StateData{})
	if err := r.store.load(cp); err != nil || cp.Data.Mode != ModeAlpha || len(cp.Data.Containers) != 2 {
		t.Fatalf("checkpoint: %v %+v", err, cp.Data)
	}
	// the fake static policy was never asked: the none policy holds nothing
	if len(r.pool.assigned) != 0 {
		t.Errorf("alpha wrote CPU manager assignments: %v", r.pool.assigned)
	}
}

func TestAlphaPutsEveryContainerWithoutAGrantOnTheSharedPool(t *testing.T) {
	r := newAlphaRig(t) // the driver registered: pinning is on
	if cpus, ok := r.m.Affinity("guaranteed", "c"); !ok || !cpus.Equals(mustParse("0-7")) {
		t.Errorf("before any grant: %v %v, want the whole machine", cpus, ok)
	}
	r.drv.reply = func(*cciv1alpha1.AdmitRequest) *cciv1alpha1.AdmitResponse {
		return &cciv1alpha1.AdmitResponse{RSet: &cciv1alpha1.ResourceSet{Cpuset: "1-3"}, Groups: []*cciv1alpha1.ResourceSet{
			{Cpuset: "1-2", Exclusive: true}, {Cpuset: "3", Exclusive: false}}}
	}
	params := `{"cores":["2","1"],"cpu attributes":[["EXCLUSIVE"],["SHARED"]]}`
	if _, err := r.m.Admit(context.Background(), request("p1", "c", params)); err != nil {
		t.Fatal(err)
	}
	// S3.3: the CCI container on its exclusive group plus its SHARED group; everyone else on online - held
	if cpus, ok := r.m.Affinity("p1", "c"); !ok || !cpus.Equals(mustParse("1-3")) {
		t.Errorf("CCI container: %v %v, want 1-3", cpus, ok)
	}
	if cpus, ok := r.m.Affinity("guaranteed", "c"); !ok || !cpus.Equals(mustParse("0,3-7")) {
		t.Errorf("container without a claim: %v %v, want 0,3-7", cpus, ok)
	}
	// S3.7: pod-resources lists the held CPUs (the exclusive group), not the SHARED group, and nothing for others
	if cpus, ok := r.m.Held("p1", "c"); !ok || !cpus.Equals(mustParse("1-2")) {
		t.Errorf("held by the CCI container: %v %v, want 1-2", cpus, ok)
	}
	if cpus, ok := r.m.Held("guaranteed", "c"); ok {
		t.Errorf("a container without a grant holds %v", cpus)
	}
	r.m.ContainerRemoved(context.Background(), "p1", "c")
	if cpus, ok := r.m.Affinity("guaranteed", "c"); !ok || !cpus.Equals(mustParse("0-7")) {
		t.Errorf("after the release: %v %v, want 0-7", cpus, ok)
	}
	if cpus, ok := r.m.Held("p1", "c"); ok {
		t.Errorf("a released container still holds %v", cpus)
	}
}

func TestAlphaListsNoCPUsForASharedOnlyGrant(t *testing.T) {
	r := newAlphaRig(t)
	r.drv.reply = func(*cciv1alpha1.AdmitRequest) *cciv1alpha1.AdmitResponse {
		return &cciv1alpha1.AdmitResponse{RSet: &cciv1alpha1.ResourceSet{Cpuset: "2-3"}, Groups: []*cciv1alpha1.ResourceSet{
			{Cpuset: "2-3", Exclusive: false}}}
	}
	if _, err := r.m.Admit(context.Background(), request("p1", "c", `{"cores":["2"],"cpu attributes":[["SHARED"]]}`)); err != nil {
		t.Fatal(err)
	}
	if cpus, ok := r.m.Held("p1", "c"); ok {
		t.Errorf("a SHARED-only container holds %v: pod-resources lists no cpu_ids for it (S3.7)", cpus)
	}
}

func TestAlphaWithoutACCIDriverLeavesCpusetsToTheNonePolicy(t *testing.T) {
	r := newAlphaRig(t)
	r.m.Registry.Close()
	quiet := r.newManager() // a restart with an empty checkpoint and no driver registered yet
	if err := quiet.Restore(r.store.load, os.IsNotExist, nil); err != nil {
		t.Fatal(err)
	}
	if cpus, ok := quiet.Affinity("pod", "c"); ok {
		t.Errorf("no CCI driver ever registered, yet the container is pinned to %v", cpus)
	}
	// coexistence never pins containers without a grant: they are the static policy's
	co := newRig(t, time.Second)
	if cpus, ok := co.m.Affinity("pod", "c"); ok {
		t.Errorf("coexistence pinned a static policy container to %v", cpus)
	}
}

// grantOne admits container p1/c a grant of CPUs 2-3 and reports it created (id cid-p1), as the
// kubelet would before the restarts these tests play.
func (r *rig) grantOne(t *testing.T) context.Context {
	t.Helper()
	ctx := context.Background()
	r.drv.reply = grantAll("2-3")
	if _, err := r.m.Admit(ctx, request("p1", "c", `{"cores":["2"]}`)); err != nil {
		t.Fatal(err)
	}
	if err := r.m.ContainerCreated(ctx, "p1", "c", "cid-p1", "/cg"); err != nil {
		t.Fatal(err)
	}
	return ctx
}

func TestAlphaRestoreHoldsTheGrantsAgainAndRefusesAModeChange(t *testing.T) {
	r := newAlphaRig(t)
	r.grantOne(t)
	// kill -9: the in-memory store is gone, cci_manager_state is all there is
	r.m.Registry.Close()
	r.own = NewOwnPool(mustParse("0-7"), mustParse("0"))
	m2 := r.newManager()
	if err := m2.Restore(r.store.load, os.IsNotExist, map[string]bool{"cid-p1": true}); err != nil {
		t.Fatal(err)
	}
	if got := r.own.Available(); !got.Equals(mustParse("1,4-7")) {
		t.Errorf("available after restore = %v, want 1,4-7", got)
	}
	// a restored grant pins the others before any driver registered again
	if cpus, ok := m2.Affinity("p1", "c"); !ok || !cpus.Equals(cpuset.New(2, 3)) {
		t.Errorf("restored CCI container: %v %v", cpus, ok)
	}
	if cpus, ok := m2.Affinity("other", "c"); !ok || !cpus.Equals(mustParse("0-1,4-7")) {
		t.Errorf("container without a claim after restore: %v %v", cpus, ok)
	}
	// the same file under the static policy (coexistence) is refused with the embedded node's advice
	r.own = nil
	err := r.newManager().Restore(r.store.load, os.IsNotExist, map[string]bool{"cid-p1": true})
	if err == nil || !strings.Contains(err.Error(), "configured mode 'coexistence' differs from checkpoint mode 'alpha'") ||
		!strings.Contains(err.Error(), "please drain this node and delete the CCI manager checkpoint file") {
		t.Errorf("mode change: err = %v", err)
	}
}

func TestOwnPoolRefusesWhatIsNotAvailable(t *testing.T) {
	p := NewOwnPool(mustParse("0-7"), mustParse("0"))
	if err := p.Hold("a", "c", mustParse("1-2")); err != nil {
		t.Fatal(err)
	}
	if err := p.Hold("a", "c", mustParse("1-2")); err != nil {
		t.Errorf("holding the same set again (a restart) must be a no-op: %v", err)
	}
	for _, bad := range []struct{ pod, cpus string }{{"a", "1-3"}, {"b", "2-3"}, {"b", "0"}, {"b", "8"}} {
		if err := p.Hold(bad.pod, "c", mustParse(bad.cpus)); err == nil {
			t.Errorf("Hold(%s, %s) was accepted", bad.pod, bad.cpus)
		}
	}
	p.Release("a", "c")
	p.Release("nobody", "c")
	if !p.Available().Equals(mustParse("1-7")) || !p.Assigned().IsEmpty() || !p.Shared().Equals(mustParse("0-7")) {
		t.Errorf("after release: available %v, assigned %v, shared %v", p.Available(), p.Assigned(), p.Shared())
	}
}
