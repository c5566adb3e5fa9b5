package nriplugin_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/cdi"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/checkpoint"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/fixture"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/kubeletstate"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/mutant"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/nriplugin"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/pinning"
)

const driver = "d.example"

func plugin(t *testing.T) *nriplugin.Plugin {
	e, err := pinning.New(fixture.Machine(t, "laptop-1s4c-smt2"), cpuset.New(), checkpoint.Store{Dir: t.TempDir(), Driver: driver}, mutant.None)
	if err != nil {
		t.Fatal(err)
	}
	return &nriplugin.Plugin{Engine: e, DriverName: driver}
}

func pod(uid string) *api.PodSandbox {
	return &api.PodSandbox{Id: "sb-" + uid, Uid: uid, Name: "p", Namespace: "ns"}
}

func ctr(id, podUID string, env []string, cpus string) *api.Container {
	c := &api.Container{Id: id, PodSandboxId: "sb-" + podUID, Name: id, Env: env, State: api.ContainerState_CONTAINER_RUNNING}
	if cpus != "" {
		c.Linux = &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: cpus}}}
	}
	return c
}

func TestCreateContainerSetsTheCpuset(t *testing.T) {
	p := plugin(t)
	uid := "1234-abcd"
	if _, err := p.Engine.Grant(pinning.Request{UID: uid, Namespace: "ns", Name: "c", Pods: []string{"pod-a"}, CPUs: cpuset.New(2, 6)}); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=/bin", cdi.EnvName(uid) + "=2,6"}
	adjust, _, err := p.CreateContainer(context.Background(), pod("pod-a"), ctr("c1", "pod-a", env, ""))
	if err != nil || adjust.GetLinux().GetResources().GetCpu().GetCpus() != "2,6" {
		t.Fatalf("claimed container adjusted to %v (err %v), want cpuset 2,6", adjust.GetLinux().GetResources().GetCpu(), err)
	}
	adjust, _, _ = p.CreateContainer(context.Background(), pod("pod-b"), ctr("s1", "pod-b", nil, ""))
	if got := adjust.GetLinux().GetResources().GetCpu().GetCpus(); got != "0-1,3-5,7" {
		t.Errorf("shared container adjusted to %q, want 0-1,3-5,7", got)
	}
	// Claims also reach the plugin as CDI device names where the runtime passes them.
	c := ctr("c2", "pod-a", nil, "")
	c.CDIDevices = []*api.CDIDevice{{Name: cdi.DeviceID(driver, uid)}}
	if adjust, _, err := p.CreateContainer(context.Background(), pod("pod-a"), c); err != nil ||
		adjust.GetLinux().GetResources().GetCpu().GetCpus() != "2,6" {
		t.Errorf("container with the claim's CDI device: %v %v", adjust, err)
	}
	if _, _, err := p.CreateContainer(context.Background(), pod("pod-a"), ctr("c3", "pod-a", []string{cdi.EnvName("unknown") + "=0"}, "")); err == nil {
		t.Error("a container with an unprepared claim was created")
	}
}

func TestSynchronizeUpdatesEveryStaleContainer(t *testing.T) {
	p := plugin(t)
	if _, err := p.Engine.Grant(pinning.Request{UID: "u", Namespace: "ns", Name: "c", CPUs: cpuset.New(0, 4)}); err != nil {
		t.Fatal(err)
	}
	pods := []*api.PodSandbox{pod("a"), pod("b")}
	ctrs := []*api.Container{
		ctr("claimed", "a", []string{cdi.EnvName("u") + "=0,4"}, "0,4"),
		ctr("late", "b", nil, "0-7"),
		ctr("gone", "b", nil, "0-7"),
	}
	ctrs[2].State = api.ContainerState_CONTAINER_STOPPED
	updates, err := p.Synchronize(context.Background(), pods, ctrs)
	if err != nil || len(updates) != 1 || updates[0].GetContainerId() != "late" ||
		updates[0].GetLinux().GetResources().GetCpu().GetCpus() != "1-3,5-7" || !updates[0].GetIgnoreFailure() {
		t.Fatalf("sync updates %v (err %v): want late moved to 1-3,5-7", updates, err)
	}
}

func TestEnvAndDeviceNames(t *testing.T) {
	got := cdi.ClaimsFromEnv([]string{cdi.EnvName("a-b-c") + "=1", "OTHER=x", cdi.EnvPrefix + "=y"})
	if len(got) != 1 || got[0] != "a-b-c" {
		t.Errorf("claims from env %v", got)
	}
	if got := cdi.ClaimsFromDevices(driver, []string{"other.example/gpu=x", cdi.DeviceID(driver, "u1")}); len(got) != 1 || got[0] != "u1" {
		t.Errorf("claims from CDI devices %v", got)
	}
	if !strings.HasPrefix(cdi.DeviceID(driver, "u"), driver+"/cpu=") {
		t.Error(cdi.DeviceID(driver, "u"))
	}
}

// A container the kubelet's static policy pinned (its pod UID and container name are in the checkpoint)
// gets no cpuset from the plugin, so it keeps the one the kubelet put in its create request; the other
// containers run off its CPUs.
func TestKubeletPinnedContainerGetsNoAdjustment(t *testing.T) {
	p := plugin(t)
	state := filepath.Join(t.TempDir(), "cpu_manager_state")
	fixture.WriteCPUManagerState(t, state, "static", "0,2-4,6-7", map[string]map[string]string{"pod-g": {"g0": "1,5"}})
	p.Engine.SetKubeletState(&kubeletstate.File{Path: state})
	adjust, updates, err := p.CreateContainer(context.Background(), pod("pod-g"), ctr("g0", "pod-g", nil, "1,5"))
	if err != nil || adjust.GetLinux().GetResources().GetCpu().GetCpus() != "" || len(updates) != 0 {
		t.Fatalf("kubelet-pinned container adjusted to %v, updates %v (err %v); want no cpuset", adjust, updates, err)
	}
	adjust, _, _ = p.CreateContainer(context.Background(), pod("pod-b"), ctr("s1", "pod-b", nil, "0,2-4,6-7"))
	if got := adjust.GetLinux().GetResources().GetCpu().GetCpus(); got != "0,2-4,6-7" {
		t.Errorf("shared container adjusted to %q, want 0,2-4,6-7 (without the pinned 1,5)", got)
	}
	if c := nriplugin.ContainerOf(driver, pod("pod-g"), ctr("g0", "pod-g", nil, "")); c.ContainerName != "g0" || c.PodUID != "pod-g" {
		t.Errorf("checkpoint key of the NRI container: %+v", c)
	}
}
