package ccimanager

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	cciv1alpha1 "github.com/cci-conformance/cci-conformance/api/cci/v1alpha1"
	"google.golang.org/grpc"
	"k8s.io/utils/cpuset"
)

// fakeDriver is a CCI driver served over a real unix socket; reply decides each CCIAdmit answer.
type fakeDriver struct {
	cciv1alpha1.UnimplementedCCIDriverServer
	mu    sync.Mutex
	reply func(*cciv1alpha1.AdmitRequest) *cciv1alpha1.AdmitResponse
	delay time.Duration
	// addDelay is how long each CCIAddContainerResource takes (a driver slow to start containers)
	addDelay time.Duration
	admits   []*cciv1alpha1.AdmitRequest
	adds     []*cciv1alpha1.AddResourceRequest
	removes  []*cciv1alpha1.RemoveResourceRequest
}

func (f *fakeDriver) CCIAdmit(ctx context.Context, req *cciv1alpha1.AdmitRequest) (*cciv1alpha1.AdmitResponse, error) {
	f.mu.Lock()
	f.admits = append(f.admits, req)
	delay, reply := f.delay, f.reply
	f.mu.Unlock()
	select {
	case <-time.After(delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return reply(req), nil
}

func (f *fakeDriver) CCIAddContainerResource(ctx context.Context, req *cciv1alpha1.AddResourceRequest) (*cciv1alpha1.AddResourceResponse, error) {
	f.mu.Lock()
	f.adds = append(f.adds, req)
	delay := f.addDelay
	f.mu.Unlock()
	select {
	case <-time.After(delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &cciv1alpha1.AddResourceResponse{}, nil
}

func (f *fakeDriver) CCIRemoveContainerResource(_ context.Context, req *cciv1alpha1.RemoveResourceRequest) (*cciv1alpha1.RemoveResourceResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removes = append(f.removes, req)
	return &cciv1alpha1.RemoveResourceResponse{}, nil
}

func (f *fakeDriver) removed() []*cciv1alpha1.RemoveResourceRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*cciv1alpha1.RemoveResourceRequest(nil), f.removes...)
}

// grantAll answers every CCIAdmit with the given cpuset as one exclusive group.
func grantAll(cpus string) func(*cciv1alpha1.AdmitRequest) *cciv1alpha1.AdmitResponse {
	return func(*cciv1alpha1.AdmitRequest) *cciv1alpha1.AdmitResponse {
		return &cciv1alpha1.AdmitResponse{RSet: &cciv1alpha1.ResourceSet{Cpuset: cpus, Exclusive: true}}
	}
}

// serve starts the driver on <dir>/plugins/<name>.sock and returns the socket path.
func serve(t *testing.T, dir, name string, drv *fakeDriver) string {
	t.Helper()
	plugins := filepath.Join(dir, "plugins")
	if err := os.MkdirAll(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(plugins, name+".sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	cciv1alpha1.RegisterCCIDriverServer(srv, drv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return sock
}

// fakePool is the static policy's state reduced to what Pool promises: a default set, reserved CPUs and
// one assignment per container.
type fakePool struct {
	mu       sync.Mutex
	def      cpuset.CPUSet
	reserved cpuset.CPUSet
	assigned map[key]cpuset.CPUSet
}

func newPool(online, reserved string) *fakePool {
	return &fakePool{def: mustParse(online), reserved: mustParse(reserved), assigned: map[key]cpuset.CPUSet{}}
}

func (p *fakePool) Available() cpuset.CPUSet {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.def.Difference(p.reserved)
}

func (p *fakePool) Hold(pod, c string, held cpuset.CPUSet) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur, ok := p.assigned[key{pod, c}]; ok {
		if cur.Equals(held) {
			return nil
		}
		return fmt.Errorf("holds %s, not %s", cur, held)
	}
	if !held.IsSubsetOf(p.def.Difference(p.reserved)) {
		return fmt.Errorf("%s not available", held)
	}
	p.assigned[key{pod, c}] = held
	p.def = p.def.Difference(held)
	return nil
}

func (p *fakePool) Release(pod, c string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur, ok := p.assigned[key{pod, c}]; ok {
		delete(p.assigned, key{pod, c})
		p.def = p.def.Union(cur)
	}
}

func (p *fakePool) Assigned() cpuset.CPUSet {
	p.mu.Lock()
	defer p.mu.Unlock()
	all := cpuset.New()
	for _, s := range p.assigned {
		all = all.Union(s)
	}
	return all
}

func (p *fakePool) Shared() cpuset.CPUSet {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.def
}

// fileStore stands for the kubelet's checkpoint manager: whole-file writes, read back through the
// Checkpoint interface (Unmarshal, then VerifyChecksum), as checkpointmanager.GetCheckpoint does.
type fileStore struct{ path string }

func (s fileStore) save(c *Checkpoint) error {
	blob, err := c.MarshalCheckpoint()
	if err != nil {
		return err
	}
	return os.WriteFile(s.path, blob, 0o644)
}

func (s fileStore) load(c *Checkpoint) error {
	blob, err := os.ReadFile(s.path)
	if err != nil {
		return err
	}
	if err := c.UnmarshalCheckpoint(blob); err != nil {
		return err
	}
	return c.VerifyChecksum()
}

// rig is a manager wired to a fake driver "drv", a pool of CPUs 0-7 with 0 reserved, on 4 cores of 2 threads.
type rig struct {
	timeout time.Duration
	dir     string
	drv     *fakeDriver
	pool    *fakePool
	store   fileStore
	m       *Manager
	// own is the alpha mode's store (newAlphaRig); nil in coexistence, where pool stands for the static policy
	own *OwnPool
}

func topology8() Topology {
	core := map[int]cpuset.CPUSet{}
	for c := 0; c < 4; c++ { // core c = CPUs c and c+4
		for _, cpu := range []int{c, c + 4} {
			core[cpu] = cpuset.New(c, c+4)
		}
	}
	return Topology{CoreOf: core}
}

func newRig(t *testing.T, timeout time.Duration) *rig {
	t.Helper()
	return newRigWith(t, timeout, nil)
}

// newAlphaRig is newRig in the alpha mode: policy none, the manager's own store of CPUs 0-7 with 0 reserved.
func newAlphaRig(t *testing.T) *rig {
	t.Helper()
	return newRigWith(t, time.Second, NewOwnPool(mustParse("0-7"), mustParse("0")))
}

func newRigWith(t *testing.T, timeout time.Duration, own *OwnPool) *rig {
	t.Helper()
	dir, err := os.MkdirTemp("", "cci") // short: unix socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	r := &rig{timeout: timeout, dir: dir, drv: &fakeDriver{reply: grantAll("1-2")}, pool: newPool("0-7", "0"),
		store: fileStore{path: filepath.Join(dir, CheckpointName)}, own: own}
	r.m = r.newManager()
	sock := serve(t, dir, "drv", r.drv)
	if err := r.m.Registry.ValidatePlugin("drv", sock, []string{SupportedVersion}); err != nil {
		t.Fatal(err)
	}
	if err := r.m.Registry.RegisterPlugin("drv", sock, []string{SupportedVersion}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.m.Registry.Close)
	return r
}

func (r *rig) newManager() *Manager {
	mode, pool := ModeCoexistence, Pool(r.pool)
	if r.own != nil {
		mode, pool = ModeAlpha, r.own
	}
	return New(Config{Mode: mode, PluginsDir: filepath.Join(r.dir, "plugins"), Timeout: r.timeout,
		Topology: topology8(), StatePath: r.store.path, Save: r.store.save}, pool)
}

func request(pod, container, params string) Request {
	return Request{PodUID: pod, PodName: "p-" + pod, Namespace: "ns", Container: container,
		Claim: Claim{UID: "uid-" + pod, Name: "claim-" + pod, Driver: "drv", Parameters: []byte(params)}}
}
