/*
Added by cci-conformance (kubelet-cci/testdata/hooks): tests of patch 0003's cci_linux.go (the CCI manager's
adapters to the container manager) against the kubelet's own CPU manager on a faked 8-CPU machine, a fake
API server and a CCI driver over a real unix socket. Run by `cci-conformance kind test-kubelet-hooks` inside
the patched tree, never part of the kubelet build.
*/

package cm

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cciv1alpha1 "github.com/cci-conformance/cci-conformance/api/cci/v1alpha1"
	"github.com/cci-conformance/cci-conformance/kubelet-cci/ccimanager"
	cadvisorapi "github.com/google/cadvisor/info/v1"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager/cache"
	"k8s.io/utils/cpuset"
)

// cciTestDriver is a CCI driver that grants CPUs 1-2 as one exclusive group (or refuses with refuse).
type cciTestDriver struct {
	cciv1alpha1.UnimplementedCCIDriverServer
	mu      sync.Mutex
	refuse  string
	admits  []*cciv1alpha1.AdmitRequest
	adds    []*cciv1alpha1.AddResourceRequest
	removes []*cciv1alpha1.RemoveResourceRequest
}

func (d *cciTestDriver) CCIAdmit(_ context.Context, req *cciv1alpha1.AdmitRequest) (*cciv1alpha1.AdmitResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.admits = append(d.admits, req)
	if d.refuse != "" {
		return &cciv1alpha1.AdmitResponse{Err: d.refuse}, nil
	}
	return &cciv1alpha1.AdmitResponse{RSet: &cciv1alpha1.ResourceSet{Cpuset: "1-2", Exclusive: true}}, nil
}

func (d *cciTestDriver) CCIAddContainerResource(_ context.Context, req *cciv1alpha1.AddResourceRequest) (*cciv1alpha1.AddResourceResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.adds = append(d.adds, req)
	return &cciv1alpha1.AddResourceResponse{}, nil
}

func (d *cciTestDriver) CCIRemoveContainerResource(_ context.Context, req *cciv1alpha1.RemoveResourceRequest) (*cciv1alpha1.RemoveResourceResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.removes = append(d.removes, req)
	return &cciv1alpha1.RemoveResourceResponse{}, nil
}

func (d *cciTestDriver) calls() (admits, adds, removes int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.admits), len(d.adds), len(d.removes)
}

type cciSourcesReady struct{}

func (cciSourcesReady) AddSource(string) {}
func (cciSourcesReady) AllReady() bool   { return false }

type cciNoStatus struct{}

func (cciNoStatus) GetPodStatus(types.UID) (v1.PodStatus, bool) { return v1.PodStatus{}, false }

type cciNoRuntime struct{}

func (cciNoRuntime) UpdateContainerResources(context.Context, string, *runtimeapi.ContainerResources) error {
	return nil
}

func cciMachineInfo() *cadvisorapi.MachineInfo {
	var cores []cadvisorapi.Core
	for c := 0; c < 4; c++ { // core c = CPUs c and c+4
		cores = append(cores, cadvisorapi.Core{Id: c, Threads: []int{c, c + 4}, SocketID: 0})
	}
	return &cadvisorapi.MachineInfo{NumCores: 8, NumSockets: 1, Topology: []cadvisorapi.Node{{Id: 0, Cores: cores}}}
}

// cciAdmitRecorder is the topology manager's admit handler as the CCI handler wraps it.
type cciAdmitRecorder struct {
	refuse bool
	calls  int
}

func (r *cciAdmitRecorder) Admit(*lifecycle.PodAdmitAttributes) lifecycle.PodAdmitResult {
	r.calls++
	if r.refuse {
		return lifecycle.PodAdmitResult{Admit: false, Reason: "TopologyAffinityError", Message: "no fit"}
	}
	return lifecycle.PodAdmitResult{Admit: true}
}

type cciRig struct {
	hooks  *cciHooks
	cpu    cpumanager.Manager
	driver *cciTestDriver
	client *fake.Clientset
	gets   atomic.Int32
}

const cciDriverName = "cci.example.com"

// newCCIRig makes the hooks as NewContainerManager does (patch 0003) for policy, starts them as Start does,
// with a fake API server holding one allocated claim of the CCI driver.
func newCCIRig(t *testing.T, policy string, register bool) *cciRig {
	t.Helper()
	root, err := os.MkdirTemp("", "cci") // short: unix socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	reservation := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
	cpu, err := cpumanager.NewManager(policy, nil, time.Hour, cciMachineInfo(), cpuset.New(0), reservation, root,
		topologymanager.NewFakeManager())
	if err != nil {
		t.Fatal(err)
	}
	noPods := func() []*v1.Pod { return nil }
	if err := cpu.Start(cpumanager.ActivePodsFunc(noPods), cciSourcesReady{}, cciNoStatus{}, cciNoRuntime{}, containermap.NewContainerMap()); err != nil {
		t.Fatal(err)
	}
	r := &cciRig{cpu: cpu, driver: &cciTestDriver{}, client: fake.NewSimpleClientset(cciClaim())}
	r.client.PrependReactor("get", "resourceclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		r.gets.Add(1)
		return false, nil, nil
	})
	config := NodeConfig{KubeletRootDir: root, CPUManagerPolicy: policy, CgroupDriver: "cgroupfs",
		NodeAllocatableConfig: NodeAllocatableConfig{ReservedSystemCPUs: cpuset.New(0)}}
	if r.hooks, err = newCCIHooks(config, cpu, cciMachineInfo(), r.client); err != nil {
		t.Fatal(err)
	}
	if err := r.hooks.start(sets.New[string](), noPods, cciSourcesReady{}); err != nil {
		t.Fatal(err)
	}
	if register {
		sock := filepath.Join(root, "plugins", "drv", "cci.sock")
		if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
			t.Fatal(err)
		}
		lis, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		cciv1alpha1.RegisterCCIDriverServer(srv, r.driver)
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		handlers := map[string]cache.PluginHandler{}
		r.hooks.addHandler(handlers) // as GetPluginRegistrationHandlers: the plugin manager registers through it
		registry := handlers[ccimanager.PluginType]
		if registry == nil {
			t.Fatalf("no %s handler among the plugin registration handlers", ccimanager.PluginType)
		}
		if err := registry.ValidatePlugin(cciDriverName, sock, []string{ccimanager.SupportedVersion}); err != nil {
			t.Fatal(err)
		}
		if err := registry.RegisterPlugin(cciDriverName, sock, []string{ccimanager.SupportedVersion}, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.hooks.mgr.Registry.Close)
	}
	return r
}

func cciClaim() *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "cpus-1", Namespace: "ns", UID: "claim-uid-1"},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "cpus", Driver: cciDriverName, Pool: "w", Device: "slot-0"}},
			Config: []resourceapi.DeviceAllocationConfiguration{{Source: resourceapi.AllocationConfigSourceClaim,
				DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
					Driver: cciDriverName, Parameters: runtime.RawExtension{Raw: []byte(`{"cpu attributes":[["EXCLUSIVE"]],"cores":["2"]}`)}}}}},
		}}},
	}
}

func cciClaimPod() *v1.Pod {
	name := "cpus-1"
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "pod-uid-1"},
		Spec: v1.PodSpec{
			ResourceClaims: []v1.PodResourceClaim{{Name: "cpus", ResourceClaimName: &name}},
			Containers:     []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "cpus"}}}}},
		},
	}
}

func TestCCIHooksExistForTheStaticAndNonePoliciesOnly(t *testing.T) {
	for policy, alpha := range map[string]bool{"static": false, "none": true} {
		r := newCCIRig(t, policy, false)
		if r.hooks == nil || r.hooks.mgr == nil {
			t.Fatalf("policy %s: no CCI manager", policy)
		}
		// alpha (policy none) has the wake-up hook of patch 0001; coexistence shares the static policy's store
		if got := r.hooks.startAlpha != nil; got != alpha {
			t.Errorf("policy %s: alpha mode %v, want %v", policy, got, alpha)
		}
		handlers := map[string]cache.PluginHandler{}
		r.hooks.addHandler(handlers)
		if handlers[ccimanager.PluginType] != cache.PluginHandler(r.hooks.mgr.Registry) {
			t.Errorf("policy %s: the %s handler is not the CCI manager's registry", policy, ccimanager.PluginType)
		}
	}
	// any other policy: no CCI manager, and every hook hands the kubelet's own object back
	var none *cciHooks
	next := &cciAdmitRecorder{}
	if none.admitHandler(next) != lifecycle.PodAdmitHandler(next) {
		t.Error("without CCI the admit handler must be the topology manager's")
	}
	if err := none.start(nil, nil, nil); err != nil {
		t.Error(err)
	}
	var lc InternalContainerLifecycle = &internalContainerLifecycleImpl{}
	if none.lifecycle(nil, lc) != lc {
		t.Error("without CCI the container lifecycle must be the kubelet's")
	}
}

func TestCCIRPCTimeoutFromTheEnvironmentMustBeADuration(t *testing.T) {
	t.Setenv(cciRPCTimeoutEnv, "five")
	root := t.TempDir()
	reservation := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
	cpu, err := cpumanager.NewManager("static", nil, time.Hour, cciMachineInfo(), cpuset.New(0), reservation, root,
		topologymanager.NewFakeManager())
	if err != nil {
		t.Fatal(err)
	}
	_, err = newCCIHooks(NodeConfig{KubeletRootDir: root, CPUManagerPolicy: "static"}, cpu, cciMachineInfo(), fake.NewSimpleClientset())
	if err == nil || !strings.Contains(err.Error(), "CCI_RPC_TIMEOUT=five: not a positive duration; fix: write e.g. 5s") {
		t.Errorf("newCCIHooks with a bad CCI_RPC_TIMEOUT = %v", err)
	}
}

func TestCCIAdmitHandlerLeavesPodsAloneWhileNoCCIDriverIsKnown(t *testing.T) {
	r := newCCIRig(t, "static", false)
	next := &cciAdmitRecorder{}
	result := r.hooks.admitHandler(next).Admit(&lifecycle.PodAdmitAttributes{Pod: cciClaimPod()})
	if !result.Admit || next.calls != 1 {
		t.Errorf("result %+v, topology manager called %d times", result, next.calls)
	}
	if r.gets.Load() != 0 {
		t.Errorf("claims were read %d times with no CCI driver known", r.gets.Load())
	}
}

func TestCCIAdmitHandlerAdmitsTheClaimBeforeTheTopologyManager(t *testing.T) {
	r := newCCIRig(t, "static", true)
	next := &cciAdmitRecorder{}
	result := r.hooks.admitHandler(next).Admit(&lifecycle.PodAdmitAttributes{Pod: cciClaimPod()})
	if !result.Admit || next.calls != 1 {
		t.Fatalf("result %+v, topology manager called %d times", result, next.calls)
	}
	req := r.driver.admits[0]
	if req.ClaimUid != "claim-uid-1" || req.ClaimName != "cpus-1" || req.Namespace != "ns" || req.Pod != "pod-uid-1" || req.Container != "app" {
		t.Errorf("CCIAdmit names the wrong claim or container: %v", req)
	}
	if req.AvailableCpus != "1-7" {
		t.Errorf("availableCpus = %q, want the static policy's 1-7", req.AvailableCpus)
	}
	if got := r.cpu.GetExclusiveCPUs("pod-uid-1", "app"); !got.Equals(cpuset.New(1, 2)) {
		t.Errorf("the grant in cpu_manager_state = %v, want 1-2", got)
	}
	if got := r.cpu.GetCPUAffinity("pod-uid-1", "app"); !got.Equals(cpuset.New(1, 2)) {
		t.Errorf("the container's cpuset at create = %v, want 1-2", got)
	}
}

func TestCCIAdmitHandlerRollsBackWhenTheTopologyManagerRefuses(t *testing.T) {
	r := newCCIRig(t, "static", true)
	next := &cciAdmitRecorder{refuse: true}
	result := r.hooks.admitHandler(next).Admit(&lifecycle.PodAdmitAttributes{Pod: cciClaimPod()})
	if result.Admit || result.Reason != "TopologyAffinityError" {
		t.Fatalf("result %+v: the topology manager's refusal must stand", result)
	}
	if admits, _, removes := r.driver.calls(); admits != 1 || removes != 1 {
		t.Errorf("CCIAdmit %d, Remove %d: the grant must be rolled back at the driver", admits, removes)
	}
	if got := r.cpu.GetExclusiveCPUs("pod-uid-1", "app"); !got.IsEmpty() {
		t.Errorf("the rolled-back grant still holds %v", got)
	}
}

func TestCCIAdmitHandlerRefusesWithTheDriversReason(t *testing.T) {
	r := newCCIRig(t, "static", true)
	r.driver.refuse = "no room"
	next := &cciAdmitRecorder{}
	result := r.hooks.admitHandler(next).Admit(&lifecycle.PodAdmitAttributes{Pod: cciClaimPod()})
	if result.Admit || result.Reason != ccimanager.ReasonCCIAdmitError || !strings.Contains(result.Message, "no room") {
		t.Errorf("result %+v, want a %s naming the driver's err", result, ccimanager.ReasonCCIAdmitError)
	}
	if next.calls != 0 {
		t.Error("a refused pod must not reach the topology manager")
	}
}

// The API server's node authorizer may not know the pod-claim edge yet when the kubelet admits a just-bound
// pod: a Forbidden read is retried under the deadline (found on kind, cci_linux.go).
func TestCCIAdmitHandlerRetriesAForbiddenClaimRead(t *testing.T) {
	r := newCCIRig(t, "static", true)
	var refused atomic.Int32
	r.client.PrependReactor("get", "resourceclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refused.Add(1) <= 2 {
			return true, nil, apierrors.NewForbidden(resourceapi.Resource("resourceclaims"), "cpus-1",
				errors.New("no relationship found between node and this object"))
		}
		return false, nil, nil
	})
	result := r.hooks.admitHandler(&cciAdmitRecorder{}).Admit(&lifecycle.PodAdmitAttributes{Pod: cciClaimPod()})
	if !result.Admit || refused.Load() < 3 {
		t.Errorf("result %+v after %d reads", result, refused.Load())
	}
}

type cciPodCgroups struct{ PodContainerManager }

func (cciPodCgroups) GetPodContainerName(pod *v1.Pod) (CgroupName, string) {
	return nil, "/kubepods/pod" + string(pod.UID)
}

type cciLifecycleRecorder struct {
	InternalContainerLifecycle
	started, stopped []string
}

func (l *cciLifecycleRecorder) PreStartContainer(_ *v1.Pod, _ *v1.Container, id string) error {
	l.started = append(l.started, id)
	return nil
}

func (l *cciLifecycleRecorder) PostStopContainer(id string) error {
	l.stopped = append(l.stopped, id)
	return nil
}

// PreStartContainer sends CCIAddContainerResource with the runtime's id and the container's cgroup after the
// kubelet's own hook; PostStopContainer sends CCIRemoveContainerResource (KEP-3675 "Add" and "Remove").
func TestCCILifecycleSendsAddAtStartAndRemoveAtStop(t *testing.T) {
	for _, systemd := range []bool{false, true} {
		r := newCCIRig(t, "static", true)
		r.hooks.systemd = systemd
		pod := cciClaimPod()
		if result := r.hooks.admitHandler(&cciAdmitRecorder{}).Admit(&lifecycle.PodAdmitAttributes{Pod: pod}); !result.Admit {
			t.Fatal(result)
		}
		next := &cciLifecycleRecorder{}
		lc := &cciLifecycle{InternalContainerLifecycle: next, h: r.hooks, pcm: cciPodCgroups{}}
		if err := lc.PreStartContainer(pod, &pod.Spec.Containers[0], "abc"); err != nil {
			t.Fatal(err)
		}
		add := r.driver.adds[0]
		want := "/kubepods/podpod-uid-1/abc"
		if systemd {
			want = "/kubepods/podpod-uid-1/cri-containerd-abc.scope"
		}
		if add.ContainerId != "abc" || add.Pod != "pod-uid-1" || add.Container != "app" || add.Cgroup != want {
			t.Errorf("systemd=%v: Add = %v, want container abc in cgroup %s", systemd, add, want)
		}
		if len(next.started) != 1 {
			t.Error("the kubelet's own PreStartContainer must run first")
		}
		if err := lc.PostStopContainer("abc"); err != nil {
			t.Fatal(err)
		}
		if _, _, removes := r.driver.calls(); removes != 1 || r.driver.removes[0].ContainerId != "abc" {
			t.Errorf("systemd=%v: Removes %v, want one for abc", systemd, r.driver.removes)
		}
		if got := r.cpu.GetExclusiveCPUs("pod-uid-1", "app"); !got.IsEmpty() {
			t.Errorf("a stopped CCI container still holds %v", got)
		}
	}
}
