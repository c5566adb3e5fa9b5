package nriplugin_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/cdi"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/pinning"
)

// fakeRuntime is NRI's own runtime side (pkg/adaptation, what containerd embeds) on a private
// socket, with the containers it "runs" and the unsolicited updates it received. synced records
// every sync: one with no plugin when the runtime starts, then one per plugin that connects.
type fakeRuntime struct {
	mu         sync.Mutex
	r          *adaptation.Adaptation
	pods       []*api.PodSandbox
	containers []*api.Container
	synced     [][]*api.ContainerUpdate
	updates    [][]*api.ContainerUpdate
}

func startRuntime(t *testing.T, socket string, f *fakeRuntime) {
	t.Helper()
	dir := t.TempDir()
	sync := func(ctx context.Context, cb adaptation.SyncCB) error {
		f.mu.Lock()
		pods, ctrs := f.pods, f.containers
		f.mu.Unlock()
		updates, err := cb(ctx, pods, ctrs)
		f.mu.Lock()
		f.synced = append(f.synced, updates)
		f.mu.Unlock()
		return err
	}
	update := func(_ context.Context, u []*adaptation.ContainerUpdate) ([]*adaptation.ContainerUpdate, error) {
		f.mu.Lock()
		f.updates = append(f.updates, u)
		f.mu.Unlock()
		return nil, nil
	}
	r, err := adaptation.New("fake-runtime", "v0", sync, update, adaptation.WithSocketPath(socket),
		adaptation.WithPluginPath(filepath.Join(dir, "plugins")), adaptation.WithPluginConfigPath(filepath.Join(dir, "conf")))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	f.r = r
}

// waitFor polls cond until it holds or the deadline passes (no bare sleeps).
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func cpusOf(u *api.ContainerUpdate) string { return u.GetLinux().GetResources().GetCpu().GetCpus() }

func TestAgainstNRIRuntime(t *testing.T) {
	sockDir, err := os.MkdirTemp("", "nri") // short: a unix socket path has at most 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	socket := filepath.Join(sockDir, "nri.sock")
	p := plugin(t)
	var conns []net.Conn
	var connsMu sync.Mutex
	p.Dial = func(path string) (net.Conn, error) {
		c, err := net.Dial("unix", path)
		if err == nil {
			connsMu.Lock()
			conns = append(conns, c)
			connsMu.Unlock()
		}
		return c, err
	}
	if _, err := p.Engine.Grant(pinning.Request{UID: "a", Namespace: "ns", Name: "a", Pods: []string{"pod-a"}, CPUs: cpuset.New(1, 5)}); err != nil {
		t.Fatal(err)
	}
	// A container created while the driver was away: no cpuset from it.
	f := &fakeRuntime{pods: []*api.PodSandbox{pod("pod-b")}, containers: []*api.Container{ctr("late", "pod-b", nil, "0-7")}}
	startRuntime(t, socket, f)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx, socket, "dra-reference", "10"); close(done) }()
	defer func() { cancel(); <-done }()

	waitFor(t, "the plugin to connect and synchronize", 10*time.Second, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return p.Connected() && len(f.synced) == 2
	})
	if s := f.synced[1]; len(s) != 1 || s[0].GetContainerId() != "late" || cpusOf(s[0]) != "0,2-4,6-7" {
		t.Fatalf("synchronize answered %v: want late moved to 0,2-4,6-7", s)
	}
	rpl, err := f.r.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod("pod-a"),
		Container: ctr("c1", "pod-a", []string{cdi.EnvName("a") + "=1,5"}, "")})
	if err != nil || rpl.GetAdjust().GetLinux().GetResources().GetCpu().GetCpus() != "1,5" {
		t.Fatalf("create: %v %v; want cpuset 1,5", rpl, err)
	}
	// A new grant shrinks the pool: the runtime gets an unsolicited update for the shared container.
	if _, err := p.Engine.Grant(pinning.Request{UID: "b", Namespace: "ns", Name: "b", CPUs: cpuset.New(2)}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	got := f.updates
	f.mu.Unlock()
	if len(got) != 1 || len(got[0]) != 1 || got[0][0].GetContainerId() != "late" || cpusOf(got[0][0]) != "0,3-4,6-7" {
		t.Fatalf("unsolicited updates %v: want late set to 0,3-4,6-7", got)
	}
	// The runtime goes away and comes back (containerd restart): the plugin reconnects and syncs again.
	f.r.Stop() // containerd exiting closes every plugin connection; the adaptation alone does not
	connsMu.Lock()
	for _, c := range conns {
		c.Close()
	}
	connsMu.Unlock()
	waitFor(t, "the plugin to notice the lost connection", 10*time.Second, func() bool { return !p.Connected() })
	f.mu.Lock()
	f.containers = append(f.containers, ctr("later", "pod-b", nil, "0-7"))
	f.mu.Unlock()
	startRuntime(t, socket, f)
	defer f.r.Stop()
	waitFor(t, "the plugin to reconnect and synchronize", 15*time.Second, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return p.Connected() && len(f.synced) == 4
	})
	moved := map[string]string{}
	for _, u := range f.synced[3] {
		moved[u.GetContainerId()] = cpusOf(u)
	}
	if moved["later"] != "0,3-4,6-7" {
		t.Errorf("after reconnect the updates were %v: want later moved to 0,3-4,6-7", moved)
	}
}
