/*
Added by cci-conformance (kubelet-cci/testdata/hooks): tests of patch 0001 (cci_pool.go and its hunks in
cpu_manager.go) against the kubelet's own CPU manager on a faked 8-CPU machine. Run by
`cci-conformance kind test-kubelet-hooks` inside the patched tree, never part of the kubelet build.
*/

package cpumanager

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	cadvisorapi "github.com/google/cadvisor/info/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/utils/cpuset"
)

// cciMachine: one socket, 4 cores of 2 threads, core c = CPUs c and c+4.
func cciMachine() *cadvisorapi.MachineInfo {
	var cores []cadvisorapi.Core
	for c := 0; c < 4; c++ {
		cores = append(cores, cadvisorapi.Core{Id: c, Threads: []int{c, c + 4}, SocketID: 0})
	}
	return &cadvisorapi.MachineInfo{NumCores: 8, NumSockets: 1, Topology: []cadvisorapi.Node{{Id: 0, Cores: cores}}}
}

// cciRuntime records the cpusets the CPU manager asks the runtime for, by container id.
type cciRuntime struct {
	mu     sync.Mutex
	cpuset map[string]string
}

func (r *cciRuntime) UpdateContainerResources(_ context.Context, id string, res *runtimeapi.ContainerResources) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cpuset[id] = res.GetLinux().GetCpusetCpus()
	return nil
}

func (r *cciRuntime) get(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cpuset[id]
}

type cciStatuses map[types.UID]v1.PodStatus

func (s cciStatuses) GetPodStatus(uid types.UID) (v1.PodStatus, bool) {
	st, ok := s[uid]
	return st, ok
}

type cciSources struct{}

func (cciSources) AddSource(string) {}
func (cciSources) AllReady() bool   { return false } // no stale-state removal behind the test's back

func runningStatus(containers ...string) v1.PodStatus {
	var st v1.PodStatus
	for _, c := range containers {
		st.ContainerStatuses = append(st.ContainerStatuses, v1.ContainerStatus{Name: c, ContainerID: "containerd://id-" + c,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}})
	}
	return st
}

func cciPod(uid string, cpus string, containers ...string) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: "pod-" + uid, Namespace: "ns"}}
	for _, c := range containers {
		res := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpus), v1.ResourceMemory: resource.MustParse("1G")}
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: c,
			Resources: v1.ResourceRequirements{Requests: res, Limits: res}})
	}
	return pod
}

type cciNode struct {
	m       *manager
	runtime *cciRuntime
	pods    []*v1.Pod
	status  cciStatuses
}

// startCCINode starts the kubelet's CPU manager with policy (reserved CPU 0) as the container manager does,
// with a state file in a temp dir and a runtime that records what it is asked.
func startCCINode(t *testing.T, policy string, reconcile time.Duration) *cciNode {
	t.Helper()
	reservation := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
	mgr, err := NewManager(policy, nil, reconcile, cciMachine(), cpuset.New(0), reservation, t.TempDir(),
		topologymanager.NewFakeManager())
	if err != nil {
		t.Fatal(err)
	}
	n := &cciNode{m: mgr.(*manager), runtime: &cciRuntime{cpuset: map[string]string{}}, status: cciStatuses{}}
	active := func() []*v1.Pod { return n.pods }
	if err := n.m.Start(active, cciSources{}, n.status, n.runtime, containermap.NewContainerMap()); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *cciNode) run(pod *v1.Pod) {
	n.pods = append(n.pods, pod)
	var names []string
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	n.status[pod.UID] = runningStatus(names...)
}

type notTheKubeletsManager struct{ Manager }

func TestCCIPoolAndAlphaRefuseACPUManagerWhoseStoreTheyCannotShare(t *testing.T) {
	static := startCCINode(t, string(PolicyStatic), time.Hour)
	none := startCCINode(t, string(PolicyNone), time.Hour)
	if _, err := NewCCIPool(none.m); err == nil || !strings.Contains(err.Error(), `policy "none" does not share its store`) {
		t.Errorf("NewCCIPool(none) = %v", err)
	}
	if _, err := NewCCIPool(notTheKubeletsManager{}); err == nil || !strings.Contains(err.Error(), "not the kubelet's own") {
		t.Errorf("NewCCIPool(other manager) = %v", err)
	}
	if _, err := NewCCIAlpha(static.m, cpuset.New(0), nil, nil); err == nil || !strings.Contains(err.Error(), `policy "static" is not none`) {
		t.Errorf("NewCCIAlpha(static) = %v", err)
	}
	if _, err := NewCCIPool(static.m); err != nil {
		t.Errorf("NewCCIPool(static) = %v", err)
	}
}

// Coexistence (docs/spec.md S3.1): a CCI grant is the container's cpu_manager_state assignment and leaves the
// default set, so the static policy never hands it out again and never offers it as availableCpus.
func TestCCIPoolHoldIsTheStaticPolicysAssignment(t *testing.T) {
	n := startCCINode(t, string(PolicyStatic), time.Hour)
	pool, err := NewCCIPool(n.m)
	if err != nil {
		t.Fatal(err)
	}
	if got := pool.Available(); !got.Equals(cpuset.New(1, 2, 3, 4, 5, 6, 7)) {
		t.Fatalf("available = %v, want online minus reserved 1-7", got)
	}
	if err := pool.Hold("cci", "c", cpuset.New(1, 5)); err != nil {
		t.Fatal(err)
	}
	if got, ok := n.m.state.GetCPUSet("cci", "c"); !ok || !got.Equals(cpuset.New(1, 5)) {
		t.Errorf("cpu_manager_state entry = %v %v, want 1,5", got, ok)
	}
	if got := pool.Shared(); !got.Equals(cpuset.New(0, 2, 3, 4, 6, 7)) {
		t.Errorf("default set = %v, want 0,2-4,6-7", got)
	}
	if got := pool.Available(); !got.Equals(cpuset.New(2, 3, 4, 6, 7)) {
		t.Errorf("available = %v, want 2-4,6-7", got)
	}
	if err := pool.Hold("cci", "c", cpuset.New(1, 5)); err != nil {
		t.Errorf("holding the same grant again (a restored record): %v", err)
	}
	if err := pool.Hold("cci", "c", cpuset.New(2)); err == nil || !strings.Contains(err.Error(), "holds 1,5 in cpu_manager_state") {
		t.Errorf("another grant for a held container = %v", err)
	}
	if err := pool.Hold("other", "c", cpuset.New(0, 5)); err == nil || !strings.Contains(err.Error(), "CPUs 0,5 are not available") {
		t.Errorf("a grant of a reserved and a held CPU = %v", err)
	}
	// the static policy allocates a Guaranteed pod around the grant
	static := cciPod("static", "2", "app")
	if err := n.m.Allocate(static, &static.Spec.Containers[0]); err != nil {
		t.Fatal(err)
	}
	got, _ := n.m.state.GetCPUSet("static", "app")
	if got.Size() != 2 || got.Intersection(cpuset.New(0, 1, 5)).Size() != 0 {
		t.Errorf("the static policy gave %v: it must leave reserved 0 and the CCI grant 1,5 alone", got)
	}
	if want := cpuset.New(1, 5).Union(got); !pool.Assigned().Equals(want) {
		t.Errorf("assigned = %v, want %v", pool.Assigned(), want)
	}
	pool.Release("cci", "c")
	if _, ok := n.m.state.GetCPUSet("cci", "c"); ok {
		t.Error("a released grant must leave cpu_manager_state")
	}
	if !cpuset.New(1, 5).IsSubsetOf(pool.Available()) {
		t.Errorf("released CPUs 1,5 are not available again: %v", pool.Available())
	}
}

// GetCPUAffinity (the cpuset at container create) and the reconcile loop ask the CCI manager first: a CCI
// container runs on its effective set, not on the withheld siblings its assignment also holds.
func TestCCIEffectiveAnswersGetCPUAffinityAndTheReconcileLoop(t *testing.T) {
	n := startCCINode(t, string(PolicyStatic), time.Hour)
	pool, err := NewCCIPool(n.m)
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.Hold("cci", "c", cpuset.New(1, 5)); err != nil { // CPU 1 granted, its sibling 5 withheld
		t.Fatal(err)
	}
	pool.SetCCIEffective(func(pod, container string) (cpuset.CPUSet, bool) {
		if pod == "cci" && container == "c" {
			return cpuset.New(1), true
		}
		return cpuset.CPUSet{}, false
	})
	if got := n.m.GetCPUAffinity("cci", "c"); !got.Equals(cpuset.New(1)) {
		t.Errorf("GetCPUAffinity(CCI container) = %v, want its effective 1", got)
	}
	if got := n.m.GetCPUAffinity("plain", "c"); !got.Equals(pool.Shared()) {
		t.Errorf("GetCPUAffinity(plain container) = %v, want the default set %v", got, pool.Shared())
	}
	if got := n.m.GetExclusiveCPUs("cci", "c"); !got.Equals(cpuset.New(1, 5)) {
		t.Errorf("GetExclusiveCPUs(CCI container) = %v, want what it holds 1,5 (the pod-resources List)", got)
	}
	pod := cciPod("cci", "100m", "c")
	n.run(pod)
	n.m.reconcileState()
	if got := n.runtime.get("id-c"); got != "1" {
		t.Errorf("the reconcile loop asked the runtime for %q, want the effective set 1", got)
	}
}

// A CCI container is created on its effective set (GetCPUAffinity), which may be more than the CPUs it holds in
// the static state (a SHARED group's free CPUs beside an exclusive group). AddContainer must not record the held
// CPUs as its last update: when a later exclusive grant takes the SHARED group's CPUs before the reconcile loop
// looked at the container, the effective set equals the held one and the loop would never shrink the runtime's
// cpuset (seen on kind: ACCT-010, seed 1831435211).
func TestCCIContainerShrinksToItsHeldCPUsWhenItsSharedGroupIsTaken(t *testing.T) {
	n := startCCINode(t, string(PolicyStatic), time.Hour)
	pool, err := NewCCIPool(n.m)
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.Hold("cci", "c", cpuset.New(1, 5)); err != nil { // the exclusive group
		t.Fatal(err)
	}
	effective := cpuset.New(1, 2, 5, 6) // and a SHARED group on 2,6, free when the container is created
	pool.SetCCIEffective(func(pod, container string) (cpuset.CPUSet, bool) {
		if pod == "cci" && container == "c" {
			return effective, true
		}
		return cpuset.CPUSet{}, false
	})
	pod := cciPod("cci", "100m", "c")
	n.m.AddContainer(pod, &pod.Spec.Containers[0], "id-c")
	if got, ok := n.m.lastUpdateState.GetCPUSet("cci", "c"); ok {
		t.Errorf("AddContainer recorded %v as the CCI container's last update; it was created on %v", got, effective)
	}
	effective = cpuset.New(1, 5) // a later exclusive grant took 2,6
	n.run(pod)
	n.m.reconcileState()
	if got := n.runtime.get("id-c"); got != "1,5" {
		t.Errorf("the reconcile loop asked the runtime for %q, want the shrunk effective set 1,5", got)
	}
	// a container the CCI manager does not answer for keeps the kubelet's own bookkeeping
	static := cciPod("static", "2", "app")
	if err := n.m.Allocate(static, &static.Spec.Containers[0]); err != nil {
		t.Fatal(err)
	}
	n.m.AddContainer(static, &static.Spec.Containers[0], "id-app")
	held, _ := n.m.state.GetCPUSet("static", "app")
	if got, ok := n.m.lastUpdateState.GetCPUSet("static", "app"); !ok || !got.Equals(held) {
		t.Errorf("AddContainer recorded %v %v for a static container, want its assignment %v", got, ok, held)
	}
}

// Alpha (policy none, KEP-3675 l.109-111): the CCI manager answers every cpuset; its wake-up makes online minus
// reserved allocatable and starts the reconcile loop the none policy's Start skips.
func TestCCIAlphaAnswersTheNonePolicyAndWakesItsReconcileLoop(t *testing.T) {
	n := startCCINode(t, string(PolicyNone), 20*time.Millisecond)
	effective := cpuset.New(0, 2, 3, 4, 6, 7)
	wake, err := NewCCIAlpha(n.m, cpuset.New(0),
		func(pod, container string) (cpuset.CPUSet, bool) {
			if pod == "cci" {
				return cpuset.New(1), true
			}
			return effective, true // alpha gives every container its cpuset: the shared pool
		},
		func(pod, container string) (cpuset.CPUSet, bool) {
			if pod == "cci" {
				return cpuset.New(1, 5), true
			}
			return cpuset.CPUSet{}, false
		})
	if err != nil {
		t.Fatal(err)
	}
	if got := n.m.GetAllocatableCPUs(); !got.IsEmpty() {
		t.Errorf("asleep, allocatable = %v: the unpatched none policy has none", got)
	}
	if got := n.m.GetCPUAffinity("cci", "c"); !got.Equals(cpuset.New(1)) {
		t.Errorf("GetCPUAffinity(CCI) = %v", got)
	}
	if got := n.m.GetCPUAffinity("plain", "c"); !got.Equals(effective) {
		t.Errorf("GetCPUAffinity(plain) = %v, want the shared pool %v", got, effective)
	}
	if got := n.m.GetExclusiveCPUs("cci", "c"); !got.Equals(cpuset.New(1, 5)) {
		t.Errorf("GetExclusiveCPUs(CCI) = %v, want its held 1,5 (the none policy's state has none)", got)
	}
	if got := n.m.GetExclusiveCPUs("plain", "c"); !got.IsEmpty() {
		t.Errorf("GetExclusiveCPUs(plain) = %v", got)
	}
	n.run(cciPod("cci", "100m", "c"))
	n.run(cciPod("plain", "100m", "p"))
	if got := n.runtime.get("id-c"); got != "" {
		t.Fatalf("asleep, the runtime was asked for %q: the none policy runs no reconcile loop", got)
	}
	wake()
	if got := n.m.GetAllocatableCPUs(); !got.Equals(cpuset.New(1, 2, 3, 4, 5, 6, 7)) {
		t.Errorf("awake, allocatable = %v, want online minus reserved", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for n.runtime.get("id-c") != "1" || n.runtime.get("id-p") != "0,2-4,6-7" {
		if time.Now().After(deadline) {
			t.Fatalf("within 10 s of the wake-up the reconcile loop set CCI %q and plain %q, want 1 and 0,2-4,6-7",
				n.runtime.get("id-c"), n.runtime.get("id-p"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
