package kubeplugin_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/utils/cpuset"

	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/cdi"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/checkpoint"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/fixture"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/kubeletstate"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/kubeplugin"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/mutant"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/pinning"
)

const driver = "d.example"

func newPlugin(t *testing.T, machine string, mut mutant.Name) *kubeplugin.Plugin {
	t.Helper()
	e, err := pinning.New(fixture.Machine(t, machine), cpuset.New(), checkpoint.Store{Dir: t.TempDir(), Driver: driver}, mut)
	if err != nil {
		t.Fatal(err)
	}
	return &kubeplugin.Plugin{Engine: e, DriverName: driver, CDIDir: t.TempDir(), Mutant: mut}
}

func claim(uid string, results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim-" + uid, Namespace: "ns", UID: types.UID(uid)},
		Status: resourceapi.ResourceClaimStatus{
			Allocation:  &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: types.UID("pod-" + uid)}},
		},
	}
}

func cpuDev(cpu string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: "cpus", Driver: driver, Pool: "node-a", Device: "cpu-" + cpu}
}

func groupDev(node string, count int64) resourceapi.DeviceRequestAllocationResult {
	share := types.UID("share-" + node)
	return resourceapi.DeviceRequestAllocationResult{Request: "cpus", Driver: driver, Pool: "node-a", Device: "numa-" + node,
		ShareID: &share, ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{driver + "/cpu": *resource.NewQuantity(count, resource.DecimalSI)}}
}

func prepare(t *testing.T, p *kubeplugin.Plugin, c *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	t.Helper()
	out, err := p.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c})
	if err != nil || len(out) != 1 {
		t.Fatalf("prepare: %v %v", out, err)
	}
	return out[c.UID]
}

func TestPrepareIndividualWritesTheCDISpec(t *testing.T) {
	p := newPlugin(t, "laptop-1s4c-smt2", mutant.None)
	c := claim("u1", cpuDev("1"), cpuDev("5"))
	res := prepare(t, p, c)
	if res.Err != nil || len(res.Devices) != 2 || res.Devices[0].DeviceName != "cpu-1" ||
		res.Devices[0].CDIDeviceIDs[0] != cdi.DeviceID(driver, "u1") || res.Devices[0].PoolName != "node-a" {
		t.Fatalf("result %+v", res)
	}
	files, _ := filepath.Glob(filepath.Join(p.CDIDir, "*.json"))
	if len(files) != 1 {
		t.Fatalf("CDI specs %v, want one", files)
	}
	var spec struct {
		Kind    string `json:"kind"`
		Devices []struct {
			Name           string                 `json:"name"`
			ContainerEdits struct{ Env []string } `json:"containerEdits"`
		} `json:"devices"`
	}
	data, _ := os.ReadFile(files[0])
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Kind != driver+"/cpu" || spec.Devices[0].Name != "u1" || spec.Devices[0].ContainerEdits.Env[0] != cdi.EnvName("u1")+"=1,5" {
		t.Errorf("CDI spec %s", data)
	}
	if again := prepare(t, p, c); again.Err != nil || len(again.Devices) != 2 {
		t.Errorf("preparing again: %+v", again)
	}
	out, err := p.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: "u1"}, {UID: "unknown"}})
	if err != nil || out["u1"] != nil || out["unknown"] != nil {
		t.Errorf("unprepare: %v %v", out, err)
	}
	if files, _ := filepath.Glob(filepath.Join(p.CDIDir, "*.json")); len(files) != 0 {
		t.Errorf("CDI spec left after unprepare: %v", files)
	}
	if !p.Engine.SharedPool().Equals(cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)) {
		t.Errorf("pool after unprepare %s", p.Engine.SharedPool())
	}
}

func TestPrepareGroupedTakesTheConsumedCapacity(t *testing.T) {
	p := newPlugin(t, "server-2s8c-smt2-intel", mutant.None)
	res := prepare(t, p, claim("g1", groupDev("1", 4)))
	cpus, _ := p.Engine.Held("g1")
	if res.Err != nil || cpus.Size() != 4 || !cpus.IsSubsetOf(fixture.Machine(t, "server-2s8c-smt2-intel").Nodes[1]) ||
		res.Devices[0].ShareID == nil || *res.Devices[0].ShareID != "share-1" {
		t.Errorf("grouped claim: %+v holds %s; want 4 CPUs of node 1 and the share id passed on", res, cpus)
	}
	noCapacity := groupDev("0", 1)
	noCapacity.ConsumedCapacity = nil
	if res := prepare(t, p, claim("g2", noCapacity)); res.Err == nil || !strings.Contains(res.Err.Error(), "DRAConsumableCapacity") {
		t.Errorf("a group device without consumed capacity: %v", res.Err)
	}
}

func TestDoubleAllocationIsThatClaimsError(t *testing.T) {
	p := newPlugin(t, "laptop-1s4c-smt2", mutant.None)
	out, err := p.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{
		claim("a", cpuDev("1")), claim("b", cpuDev("1"), cpuDev("2")), claim("c", cpuDev("3"))})
	if err != nil || out["a"].Err != nil || out["c"].Err != nil {
		t.Fatalf("prepare: %v %v", out, err)
	}
	if e := out["b"].Err; e == nil || !strings.Contains(e.Error(), "double allocation") || !strings.Contains(e.Error(), "ns/claim-a") {
		t.Errorf("claim b: %v; want a double allocation naming claim a", e)
	}
}

func TestOpaqueConfigRefusedNamingTheField(t *testing.T) {
	p := newPlugin(t, "laptop-1s4c-smt2", mutant.None)
	c := claim("u", cpuDev("1"))
	c.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{{Source: resourceapi.AllocationConfigSourceClaim,
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(`{"cpus": "lots"}`)}}}}}
	res := prepare(t, p, c)
	if res.Err == nil || !strings.Contains(res.Err.Error(), "status.allocation.devices.config[0].opaque.parameters") {
		t.Errorf("opaque config: %v", res.Err)
	}
	if _, held := p.Engine.Held("u"); held {
		t.Error("the refused claim holds CPUs")
	}
	ignoring := newPlugin(t, "laptop-1s4c-smt2", mutant.IgnoresOpaqueConfig)
	if res := prepare(t, ignoring, c); res.Err != nil {
		t.Errorf("the ignores-opaque-config mutant refused: %v", res.Err)
	}
}

func TestMutantStaleUnprepares(t *testing.T) {
	p := newPlugin(t, "laptop-1s4c-smt2", mutant.StaleUnprepares)
	prepare(t, p, claim("u1", cpuDev("1")))
	p.KubeletRegisteredAgain()
	unprepare := func(uid string) {
		t.Helper()
		out, err := p.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: types.UID(uid)}})
		if err != nil || out[types.UID(uid)] != nil {
			t.Fatalf("unprepare %s: %v %v", uid, out, err)
		}
	}
	unprepare("u1")
	if _, held := p.Engine.Held("u1"); !held {
		t.Fatal("the mutant released a claim unprepared after a re-registration")
	}
	prepare(t, p, claim("u2", cpuDev("2"))) // a prepare ends the window
	unprepare("u1")
	if _, held := p.Engine.Held("u1"); held {
		t.Error("after the next prepare the unprepare was still ignored")
	}
	correct := newPlugin(t, "laptop-1s4c-smt2", mutant.None)
	prepare(t, correct, claim("u1", cpuDev("1")))
	correct.KubeletRegisteredAgain()
	if _, held := correct.Engine.Held("u1"); !held {
		t.Error("the correct driver dropped a grant on a kubelet re-registration")
	}
}

func TestForeignOrMalformedDevicesRefused(t *testing.T) {
	p := newPlugin(t, "laptop-1s4c-smt2", mutant.None)
	other := cpuDev("1")
	other.Driver = "other.example"
	for name, c := range map[string]*resourceapi.ResourceClaim{
		"no device of ours": claim("x", other), "bad name": claim("y", resourceapi.DeviceRequestAllocationResult{Driver: driver, Device: "gpu-0"}),
		"offline cpu": claim("z", cpuDev("99")),
	} {
		if res := prepare(t, p, c); res.Err == nil {
			t.Errorf("%s: prepared", name)
		}
	}
}

func TestMutantSlowPrepare(t *testing.T) {
	p := newPlugin(t, "laptop-1s4c-smt2", mutant.SlowPrepare)
	start := time.Now()
	prepare(t, p, claim("u", cpuDev("1")))
	if took := time.Since(start); took < kubeplugin.SlowPrepareDelay {
		t.Errorf("the mutant prepared in %s", took)
	}
	fast := newPlugin(t, "laptop-1s4c-smt2", mutant.None)
	start = time.Now()
	prepare(t, fast, claim("u", cpuDev("1")))
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Errorf("the driver took %s to prepare one claim, over the 100 ms budget", took)
	}
}

// Beside a static-policy kubelet, a claim allocated CPUs the kubelet pinned to a Guaranteed pod is that
// claim's error (the pod's event): it names the policy, the CPUs, the pinned container and the file.
func TestClaimOnKubeletPinnedCPUsIsThatClaimsError(t *testing.T) {
	p := newPlugin(t, "laptop-1s4c-smt2", mutant.None)
	state := filepath.Join(t.TempDir(), "cpu_manager_state")
	fixture.WriteCPUManagerState(t, state, "static", "0,3-4,7", map[string]map[string]string{"pod-g": {"c0": "1,5"}})
	p.Engine.SetKubeletState(&kubeletstate.File{Path: state})
	out, err := p.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{
		claim("a", cpuDev("1"), cpuDev("2")), claim("b", cpuDev("3"))})
	if err != nil || out["b"].Err != nil {
		t.Fatalf("prepare: %v %v", out, err)
	}
	e := out["a"].Err
	for _, want := range []string{"static CPU manager policy", "CPUs 1", "pod pod-g container c0", state, "ns/claim-a"} {
		if e == nil || !strings.Contains(e.Error(), want) {
			t.Fatalf("claim a on pinned CPU 1: %v; want it to name %q", e, want)
		}
	}
	if files, _ := filepath.Glob(filepath.Join(p.CDIDir, "*.json")); len(files) != 1 {
		t.Errorf("CDI specs %v, want claim b's only", files)
	}
}
