package ccimanager

import (
	"os"
	"strings"
	"testing"
)

// The alpha mode sleeps until a CCI driver registers or a grant is restored (alpha.go "activation"):
// before that a policy-none kubelet is the unpatched one (docs/spec.md S3.1).

func TestAlphaSleepsUntilTheFirstCCIRegistration(t *testing.T) {
	r := newAlphaRig(t)
	r.m.Registry.Close()
	_ = os.Remove(r.store.path)
	m := r.newManager() // a fresh start: no file, no driver
	woke := 0
	m.OnWake(func() { woke++ })
	if err := m.Restore(r.store.load, os.IsNotExist, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.store.path); !os.IsNotExist(err) {
		t.Errorf("a sleeping alpha wrote %s (stat: %v)", CheckpointName, err)
	}
	if cpus, ok := m.Affinity("pod", "c"); ok || m.Awake() || woke != 0 {
		t.Errorf("asleep: affinity %v %v, awake %v, hook ran %d times", cpus, ok, m.Awake(), woke)
	}
	sock := serve(t, r.dir, "drv2", r.drv)
	for i := 0; i < 2; i++ { // a re-registration does not wake it twice
		if err := m.Registry.RegisterPlugin("drv2", sock, []string{SupportedVersion}, nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(m.Registry.Close)
	if cpus, ok := m.Affinity("pod", "c"); !ok || !cpus.Equals(mustParse("0-7")) || !m.Awake() || woke != 1 {
		t.Errorf("after registration: affinity %v %v, awake %v, hook ran %d times", cpus, ok, m.Awake(), woke)
	}
	cp := NewCheckpoint(r.store.path, StateData{})
	if err := r.store.load(cp); err != nil || cp.Data.Mode != ModeAlpha || len(cp.Data.Containers) != 0 {
		t.Errorf("the wake-up writes the empty alpha checkpoint: %v %+v", err, cp.Data)
	}
	late := 0
	m.OnWake(func() { late++ }) // set after the wake-up: runs at once
	if late != 1 {
		t.Errorf("a hook set after the wake-up ran %d times", late)
	}
}

func TestAlphaWakesAtStartForARestoredGrantAndNotForAnEmptyFile(t *testing.T) {
	r := newAlphaRig(t)
	r.grantOne(t)
	r.m.Registry.Close()
	r.own = NewOwnPool(mustParse("0-7"), mustParse("0"))
	m := r.newManager()
	woke := 0
	m.OnWake(func() { woke++ })
	if err := m.Restore(r.store.load, os.IsNotExist, map[string]bool{"cid-p1": true}); err != nil {
		t.Fatal(err)
	}
	if woke != 1 || !m.Awake() {
		t.Errorf("a restored grant must wake the mode at start: hook ran %d times", woke)
	}
	// the container went away while the kubelet was down: its grant is released, nothing is held, so the
	// next start sleeps (the removal stays owed in the file, sent once the driver registers)
	r.own = NewOwnPool(mustParse("0-7"), mustParse("0"))
	m = r.newManager()
	if err := m.Restore(r.store.load, os.IsNotExist, nil); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(r.store.path)
	r.own = NewOwnPool(mustParse("0-7"), mustParse("0"))
	m = r.newManager()
	woke = 0
	m.OnWake(func() { woke++ })
	if err := m.Restore(r.store.load, os.IsNotExist, nil); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(r.store.path)
	if woke != 0 || m.Awake() || len(m.Pending()) != 1 || string(before) != string(after) {
		t.Errorf("nothing held: woke %d, awake %v, pending %v, file rewritten %v", woke, m.Awake(), m.Pending(),
			string(before) != string(after))
	}
}

func TestRestoreAcceptsAnEmptyCheckpointOfTheOtherMode(t *testing.T) {
	r := newAlphaRig(t) // registered: awake, the empty alpha file is written
	r.m.Registry.Close()
	co := *r
	co.own = nil // the same node restarted with the static policy (coexistence)
	m := co.newManager()
	if err := m.Restore(r.store.load, os.IsNotExist, nil); err != nil {
		t.Fatalf("an empty alpha file refused by coexistence: %v", err)
	}
	cp := NewCheckpoint(r.store.path, StateData{})
	if err := r.store.load(cp); err != nil || cp.Data.Mode != ModeCoexistence {
		t.Errorf("coexistence writes its own mode at start: %v %+v", err, cp.Data)
	}
	// and back to policy none: the empty coexistence file is accepted too
	if err := r.newManager().Restore(r.store.load, os.IsNotExist, nil); err != nil {
		t.Errorf("an empty coexistence file refused by alpha: %v", err)
	}
	// a removal still owed is state a driver depends on: the mode change is refused
	cp.Data.Pending = []Owed{{Driver: "drv", ClaimUID: "u", PodUID: "p", Container: "c", Why: "removal"}}
	if err := r.store.save(cp); err != nil {
		t.Fatal(err)
	}
	err := r.newManager().Restore(r.store.load, os.IsNotExist, nil)
	if err == nil || !strings.Contains(err.Error(), "configured mode 'alpha' differs from checkpoint mode 'coexistence'") {
		t.Errorf("owed removal across a mode change: err = %v", err)
	}
}

func TestCgroupCPUsReadsV2ThenV1(t *testing.T) {
	files := map[string]string{"/fs/cpuset/cpuset.effective_cpus": "0-1\n"}
	read := func(path string) ([]byte, error) {
		if text, ok := files[path]; ok {
			return []byte(text), nil
		}
		return nil, os.ErrNotExist
	}
	if set, ok := CgroupCPUs("/fs", read); !ok || !set.Equals(mustParse("0-1")) {
		t.Errorf("v1: %v %v", set, ok)
	}
	files["/fs/cpuset.cpus.effective"] = "0-7\n"
	if set, ok := CgroupCPUs("/fs", read); !ok || !set.Equals(mustParse("0-7")) {
		t.Errorf("v2 first: %v %v", set, ok)
	}
	if _, ok := CgroupCPUs("/none", read); ok {
		t.Error("no file: ok must be false")
	}
}

func TestWakeAtStartRunsTheHookOnceAndWritesTheFile(t *testing.T) {
	r := newAlphaRig(t)
	r.m.Registry.Close()
	_ = os.Remove(r.store.path)
	m := r.newManager()
	woke := 0
	m.OnWake(func() { woke++ })
	if err := m.Restore(r.store.load, os.IsNotExist, nil); err != nil {
		t.Fatal(err)
	}
	m.Wake()
	m.Wake()
	if _, err := os.Stat(r.store.path); err != nil || woke != 1 || !m.Awake() {
		t.Errorf("woken at start: file %v, hook ran %d times, awake %v", err, woke, m.Awake())
	}
}
