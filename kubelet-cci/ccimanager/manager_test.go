package ccimanager

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cciv1alpha1 "github.com/cci-conformance/cci-conformance/api/cci/v1alpha1"
	"k8s.io/utils/cpuset"
)

func rejection(t *testing.T, err error, reason string) *Rejection {
	t.Helper()
	var rej *Rejection
	if !errors.As(err, &rej) || rej.Reason != reason {
		t.Fatalf("want a %s rejection, got %v", reason, err)
	}
	return rej
}

func TestAdmitSendsWhatTheStaticPolicyCouldHandOutAndHoldsTheGrant(t *testing.T) {
	r := newRig(t, time.Second)
	if err := r.pool.Hold("static-pod", "c", cpuset.New(5, 6)); err != nil { // a static-QoS container
		t.Fatal(err)
	}
	grant, err := r.m.Admit(context.Background(), request("p1", "c", `{"cpu attributes":[["EXCLUSIVE"]],"cores":["2"]}`))
	if err != nil {
		t.Fatal(err)
	}
	req := r.drv.admits[0]
	// reserved CPU 0 and the static pod's 5-6 are never offered (docs/spec.md §3)
	if req.AvailableCpus != "1-4,7" {
		t.Errorf("availableCpus = %q, want 1-4,7", req.AvailableCpus)
	}
	// resource_handle is what the embedded node sends: json.dumps(parameters, sort_keys=True)
	if want := `{"cores": ["2"], "cpu attributes": [["EXCLUSIVE"]]}`; req.ResourceHandle != want {
		t.Errorf("resource_handle = %q, want %q", req.ResourceHandle, want)
	}
	if req.ClaimUid != "uid-p1" || req.ClaimName != "claim-p1" || req.Namespace != "ns" || req.Pod != "p1" || req.Container != "c" {
		t.Errorf("request identifies the wrong claim or container: %v", req)
	}
	if !grant.Exclusive.Equals(cpuset.New(1, 2)) {
		t.Errorf("grant = %v", grant.Exclusive)
	}
	// the grant left the shared pool: the static policy can no longer hand 1-2 to anyone
	if got := r.pool.Available(); !got.Equals(cpuset.New(3, 4, 7)) {
		t.Errorf("available after the grant = %v, want 3-4,7", got)
	}
	if eff, ok := r.m.Effective("p1", "c"); !ok || !eff.Equals(cpuset.New(1, 2)) {
		t.Errorf("effective cpuset = %v %v", eff, ok)
	}
	if _, ok := r.m.Effective("static-pod", "c"); ok {
		t.Error("a static container must stay the CPU manager's alone")
	}
}

func TestInvalidRepliesAreRefusedAndRolledBackAtTheDriver(t *testing.T) {
	cases := map[string]struct {
		resp   *cciv1alpha1.AdmitResponse
		reason string
		words  string
		undo   bool
	}{
		"reserved CPU": {&cciv1alpha1.AdmitResponse{RSet: &cciv1alpha1.ResourceSet{Cpuset: "0-1", Exclusive: true}},
			ReasonInvalidReply, "cpuset '0-1' is not within availableCpus: '0' are reserved or held by others", true},
		"overlapping groups": {&cciv1alpha1.AdmitResponse{RSet: &cciv1alpha1.ResourceSet{Cpuset: "1-3"},
			Groups: []*cciv1alpha1.ResourceSet{{Cpuset: "1-2"}, {Cpuset: "2-3"}}}, ReasonInvalidReply, "groups overlap on 2", true},
		"union differs": {&cciv1alpha1.AdmitResponse{RSet: &cciv1alpha1.ResourceSet{Cpuset: "1-3"},
			Groups: []*cciv1alpha1.ResourceSet{{Cpuset: "1-2"}}}, ReasonInvalidReply, "union of groups '1-2' != rSet.cpuset '1-3'", true},
		"wrong group count": {&cciv1alpha1.AdmitResponse{RSet: &cciv1alpha1.ResourceSet{Cpuset: "1-3"},
			Groups: []*cciv1alpha1.ResourceSet{{Cpuset: "1"}, {Cpuset: "2-3"}}}, ReasonInvalidReply, "2 groups returned for a claim of 1", true},
		"not a cpulist": {&cciv1alpha1.AdmitResponse{RSet: &cciv1alpha1.ResourceSet{Cpuset: "x"}},
			ReasonInvalidReply, "rSet.cpuset is not a cpulist", true},
		"empty reply":    {&cciv1alpha1.AdmitResponse{}, ReasonInvalidReply, "reply has neither err nor rSet", true},
		"driver says no": {&cciv1alpha1.AdmitResponse{Err: "no room"}, ReasonCCIAdmitError, "no room", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, time.Second)
			r.drv.reply = func(*cciv1alpha1.AdmitRequest) *cciv1alpha1.AdmitResponse { return tc.resp }
			_, err := r.m.Admit(context.Background(), request("p1", "c", `{"cores":["3"]}`))
			rej := rejection(t, err, tc.reason)
			if !strings.Contains(rej.Message, tc.words) {
				t.Errorf("message %q lacks %q", rej.Message, tc.words)
			}
			if got := r.pool.Available(); !got.Equals(mustParse("1-7")) {
				t.Errorf("a refused grant must hold nothing; available = %v", got)
			}
			removes := r.drv.removed()
			if tc.undo && (len(removes) != 1 || removes[0].ContainerId != "" || removes[0].ClaimUid != "uid-p1") {
				t.Errorf("the driver may hold the grant: want one CCIRemoveContainerResource with container_id \"\", got %v", removes)
			}
			if !tc.undo && len(removes) != 0 {
				t.Errorf("the driver refused: nothing to roll back, got %v", removes)
			}
			if len(r.m.Pending()) != 0 {
				t.Errorf("removals still owed: %v", r.m.Pending())
			}
		})
	}
}

func TestSiblingDeniedWithholdsTheIdleSiblings(t *testing.T) {
	r := newRig(t, time.Second)
	r.drv.reply = grantAll("1-2")
	grant, err := r.m.Admit(context.Background(), request("p1", "c",
		`{"cores":["2"],"cpu attributes":[["EXCLUSIVE","CORE-SIBLING-DENIED"]]}`))
	if err != nil {
		t.Fatal(err)
	}
	// cores of 1 and 2 are {1,5} and {2,6}: 5 and 6 leave the pool with the grant but are not run on
	if !grant.Withheld.Equals(cpuset.New(5, 6)) || !r.pool.Available().Equals(cpuset.New(3, 4, 7)) {
		t.Errorf("withheld %v, available %v", grant.Withheld, r.pool.Available())
	}
	if eff, _ := r.m.Effective("p1", "c"); !eff.Equals(cpuset.New(1, 2)) {
		t.Errorf("effective = %v: the withheld siblings must stay idle", eff)
	}
	// a second denied grant whose siblings are held already is refused
	r.drv.reply = grantAll("3")
	if err := r.pool.Hold("static", "c", cpuset.New(7)); err != nil {
		t.Fatal(err)
	}
	_, err = r.m.Admit(context.Background(), request("p2", "c", `{"cores":["1"],"cpu attributes":[["EXCLUSIVE","CORE-SIBLING-DENIED"]]}`))
	rej := rejection(t, err, ReasonInvalidReply)
	if !strings.Contains(rej.Message, "CORE-SIBLING-DENIED group 0 uses cores whose siblings '7' are not free") {
		t.Errorf("message: %s", rej.Message)
	}
}

func TestDeadlineAndMissingDriver(t *testing.T) {
	r := newRig(t, 200*time.Millisecond)
	r.drv.delay = 2 * time.Second
	start := time.Now()
	_, err := r.m.Admit(context.Background(), request("p1", "c", `{"cores":["1"]}`))
	rej := rejection(t, err, ReasonDriverTimeout)
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Errorf("CCIAdmit must give up at its deadline, took %v", took)
	}
	if rej.Message != "CCIAdmit to driver 'drv' did not answer within 0.2s" {
		t.Errorf("message: %s", rej.Message)
	}
	req := request("p2", "c", `{}`)
	req.Claim.Driver = "other"
	_, err = r.m.Admit(context.Background(), req)
	if rej := rejection(t, err, ReasonDriverNotRegistered); rej.Message != "claim 'claim-p2' needs driver 'other'; registered: drv" {
		t.Errorf("message: %s", rej.Message)
	}
}

func TestAddAfterCreateAndRemoveOnRemoval(t *testing.T) {
	r := newRig(t, time.Second)
	ctx := context.Background()
	if _, err := r.m.Admit(ctx, request("p1", "c", `{"cores":["2"]}`)); err != nil {
		t.Fatal(err)
	}
	if err := r.m.ContainerCreated(ctx, "p1", "c", "cid-1", "/kubepods/pod-p1/cid-1"); err != nil {
		t.Fatal(err)
	}
	if err := r.m.ContainerCreated(ctx, "p9", "c", "cid-9", "/x"); err != nil || len(r.drv.adds) != 1 {
		t.Fatalf("a container without a grant is not the driver's business: %v %v", err, r.drv.adds)
	}
	add := r.drv.adds[0]
	if add.ContainerId != "cid-1" || add.Cgroup != "/kubepods/pod-p1/cid-1" || add.Pod != "p1" || add.Container != "c" {
		t.Errorf("add = %v", add)
	}
	r.m.ContainerRemovedByID(ctx, "cid-1")
	removes := r.drv.removed()
	if len(removes) != 1 || removes[0].ContainerId != "cid-1" || removes[0].ClaimName != "claim-p1" {
		t.Errorf("removes = %v", removes)
	}
	if !r.pool.Available().Equals(mustParse("1-7")) || r.m.IsCCIContainer("p1", "c") {
		t.Error("a removed container's CPUs must return to the pool")
	}
}

func TestAContainerWhoseAddFailedIsRemovedUnderBothIDs(t *testing.T) {
	r := newRig(t, 100*time.Millisecond)
	ctx := context.Background()
	if _, err := r.m.Admit(ctx, request("p1", "c", `{"cores":["2"]}`)); err != nil {
		t.Fatal(err)
	}
	r.drv.mu.Lock()
	r.drv.addDelay = time.Second // the Add meets its deadline: it may or may not have landed at the driver
	r.drv.mu.Unlock()
	if err := r.m.ContainerCreated(ctx, "p1", "c", "cid-1", "/kubepods/pod-p1/cid-1"); err == nil {
		t.Fatal("an Add past its deadline must fail the container's start")
	}
	r.m.ContainerRemoved(ctx, "p1", "c")
	var got []string
	for _, rm := range r.drv.removed() {
		got = append(got, rm.ClaimUid+"/"+rm.ContainerId)
	}
	if strings.Join(got, " ") != "uid-p1/cid-1 uid-p1/" {
		t.Errorf("removes = %v, want the container id, then the empty one", got)
	}
	if len(r.m.Pending()) != 0 || !r.pool.Available().Equals(mustParse("1-7")) {
		t.Errorf("pending %v, available %v", r.m.Pending(), r.pool.Available())
	}
}

func TestCheckpointSurvivesRestartAndReleasesWhatWentAway(t *testing.T) {
	r := newRig(t, time.Second)
	ctx := context.Background()
	for _, pod := range []string{"p1", "p2"} {
		r.drv.reply = grantAll(map[string]string{"p1": "1-2", "p2": "3"}[pod])
		if _, err := r.m.Admit(ctx, request(pod, "c", `{"cores":["1"]}`)); err != nil {
			t.Fatal(err)
		}
		if err := r.m.ContainerCreated(ctx, pod, "c", "cid-"+pod, "/cg"); err != nil {
			t.Fatal(err)
		}
	}
	// the kubelet restarts: a new manager, the same pool (cpu_manager_state survived), p2 died meanwhile
	r.m.Registry.Close()
	m2 := r.newManager()
	if err := m2.Restore(r.store.load, os.IsNotExist, map[string]bool{"cid-p1": true}); err != nil {
		t.Fatal(err)
	}
	if !m2.IsCCIContainer("p1", "c") || m2.IsCCIContainer("p2", "c") {
		t.Fatalf("restored records: %v", m2.Records())
	}
	if !r.pool.Available().Equals(mustParse("3-7")) {
		t.Errorf("p1 keeps 1-2 and p2's 3 is back: available = %v", r.pool.Available())
	}
	if owed := m2.Pending(); len(owed) != 1 || owed[0].ContainerID != "cid-p2" || owed[0].Why != "gone-while-down" {
		t.Fatalf("owed = %v", owed)
	}
	// the driver registers with the restarted kubelet: the removal it is owed is sent then
	sock := filepath.Join(r.dir, "plugins", "drv.sock")
	if err := m2.Registry.RegisterPlugin("drv", sock, []string{SupportedVersion}, nil); err != nil {
		t.Fatal(err)
	}
	defer m2.Registry.Close()
	waitFor(t, 5*time.Second, "the owed removal sent on registration", func() bool { return len(m2.Pending()) == 0 })
	// S3.6: its id, then "" in case the kubelet died between recording the id and CCIAddContainerResource
	removes := r.drv.removed()
	if len(removes) != 2 || removes[0].ContainerId != "cid-p2" || removes[1].ContainerId != "" ||
		removes[1].ClaimUid != "uid-p2" {
		t.Errorf("removes = %v", removes)
	}
}

func TestCorruptCheckpointStopsTheKubeletWithAdvice(t *testing.T) {
	r := newRig(t, time.Second)
	if _, err := r.m.Admit(context.Background(), request("p1", "c", `{"cores":["1"]}`)); err != nil {
		t.Fatal(err)
	}
	blob, _ := os.ReadFile(r.store.path)
	flipped := strings.Replace(string(blob), `1-2`, `1-3`, 1)
	if flipped == string(blob) {
		t.Fatal("test setup: grant not found in the checkpoint")
	}
	if err := os.WriteFile(r.store.path, []byte(flipped), 0o644); err != nil {
		t.Fatal(err)
	}
	err := r.newManager().Restore(r.store.load, os.IsNotExist, nil)
	if err == nil || !strings.Contains(err.Error(), "checksum mismatch") ||
		!strings.Contains(err.Error(), "please drain this node and delete the CCI manager checkpoint file '"+r.store.path+"'") {
		t.Errorf("err = %v", err)
	}
	if err := os.WriteFile(r.store.path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.newManager().Restore(r.store.load, os.IsNotExist, nil); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Errorf("err = %v", err)
	}
}

func TestCheckpointBytesAreTheEmbeddedNodesFormat(t *testing.T) {
	cp := NewCheckpoint("x", StateData{Mode: ModeCoexistence, Containers: []Record{{PodUID: "b", Container: "c", Source: "cci",
		Exclusive: "1", Groups: []GroupRecord{{CPUSet: "1", Exclusive: true}}}, {PodUID: "a", Container: "c", Source: "cci"}}})
	blob, err := cp.MarshalCheckpoint()
	if err != nil {
		t.Fatal(err)
	}
	text := string(blob)
	// sorted keys, no spaces, Data escaped as a JSON string, CRC-32 of the Data text (checkpoint.py encode)
	if !strings.HasPrefix(text, `{"Data":"{\"apiVersion\":\"checkpoint.cci.cci-conformance.io/v1\",\"containers\":[{\"claimName\":\"\",`) ||
		!strings.Contains(text, `\"podUID\":\"a\"`) || strings.Index(text, `\"podUID\":\"a\"`) > strings.Index(text, `\"podUID\":\"b\"`) ||
		!strings.Contains(text, `\"kind\":\"CCICheckpoint\",\"mode\":\"coexistence\",\"pending\":[]}","Checksum":`) {
		t.Errorf("checkpoint bytes: %s", text)
	}
	back := NewCheckpoint("x", StateData{})
	if err := back.UnmarshalCheckpoint(blob); err != nil {
		t.Fatal(err)
	}
	if err := back.VerifyChecksum(); err != nil || len(back.Data.Containers) != 2 {
		t.Errorf("round trip: %v %v", err, back.Data)
	}
}

// waitFor polls cond until it holds or the deadline passes (the registration hook runs in a goroutine).
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

func TestSharedOnlyGrantWritesNoCPUManagerEntry(t *testing.T) {
	r := newRig(t, time.Second)
	r.drv.reply = func(*cciv1alpha1.AdmitRequest) *cciv1alpha1.AdmitResponse {
		return &cciv1alpha1.AdmitResponse{RSet: &cciv1alpha1.ResourceSet{Cpuset: "1-2", Exclusive: false}}
	}
	if _, err := r.m.Admit(context.Background(), request("p1", "c", `{"cpu attributes":[["SHARED"]],"cores":["2"]}`)); err != nil {
		t.Fatal(err)
	}
	// a SHARED group holds nothing: no cpu_manager_state entry, the shared pool keeps its CPUs (spec S3.5),
	// as on the embedded node (the kind differential found the empty entry the kubelet used to write)
	if _, ok := r.pool.assigned[key{"p1", "c"}]; ok {
		t.Errorf("a SHARED-only grant got a cpu_manager_state entry: %v", r.pool.assigned)
	}
	if got := r.pool.Available(); !got.Equals(cpuset.New(1, 2, 3, 4, 5, 6, 7)) {
		t.Errorf("available after a SHARED grant = %v, want 1-7", got)
	}
}

// A CCI driver that went down keeps its claims: they are refused with DriverNotRegistered (docs/spec.md
// S3.4) instead of falling to the DRA manager, which would retry a DRA plugin of that name for ever.
func TestADriverThatWentDownStaysKnownAndItsClaimsAreRefused(t *testing.T) {
	r := newRig(t, time.Second)
	ctx := r.grantOne(t)
	sock := filepath.Join(r.dir, "plugins", "drv.sock")
	if err := os.Remove(sock); err != nil { // the driver went away with its socket (SIGTERM, spec S1.9)
		t.Fatal(err)
	}
	r.m.Registry.DeRegisterPlugin("drv", sock)
	if !r.m.Registry.Known("drv") || r.m.Registry.Known("other") || !r.m.Registry.AnyKnown() {
		t.Fatal("a deregistered driver must stay known, a never-registered one must not be")
	}
	_, err := r.m.Admit(ctx, request("p2", "c", `{"cores":["1"]}`))
	if rej := rejection(t, err, ReasonDriverNotRegistered); rej.Message != "claim 'claim-p2' needs driver 'drv'; registered: none" {
		t.Errorf("message: %s", rej.Message)
	}
	// a kubelet restart while the driver is down: the restored record makes the driver known again
	m2 := r.newManager()
	if m2.Registry.AnyKnown() {
		t.Fatal("a new manager knows no driver before Restore")
	}
	if err := m2.Restore(r.store.load, os.IsNotExist, map[string]bool{"cid-p1": true}); err != nil {
		t.Fatal(err)
	}
	if !m2.Registry.Known("drv") {
		t.Error("a driver named by cci_manager_state is known after a restart")
	}
}
