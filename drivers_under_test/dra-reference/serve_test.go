package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	"k8s.io/utils/cpuset"

	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/checkpoint"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/devices"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/fixture"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/mutant"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/pinning"
)

// node is one driver process on a fake API server, started and stopped as the DaemonSet's pod is.
type node struct {
	t      *testing.T
	c      config
	client *fake.Clientset
	stop   context.CancelFunc
	done   chan error
}

func (n *node) start() {
	n.t.Helper()
	m := fixture.Machine(n.t, "laptop-1s4c-smt2")
	devs, err := devices.List(m, DefaultDriverName, cpuset.New(0), devices.Individual, mutant.None)
	if err != nil {
		n.t.Fatal(err)
	}
	engine, err := pinning.New(m, cpuset.New(0), checkpoint.Store{Dir: n.c.stateDir, Driver: n.c.driverName}, mutant.None)
	if err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.stop, n.done = cancel, make(chan error, 1)
	go func() { n.done <- serve(ctx, n.c, n.client, devs, engine, mutant.None) }()
}

func (n *node) published(ctx context.Context) {
	n.t.Helper()
	eventually(n.t, "ResourceSlices with the 7 unreserved CPUs", func() bool {
		n.alive()
		list, err := n.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		count := 0
		for _, s := range list.Items {
			count += len(s.Spec.Devices)
		}
		return err == nil && count == 7
	})
}

// alive fails the test at once when the driver stopped on its own.
func (n *node) alive() {
	n.t.Helper()
	select {
	case err := <-n.done:
		n.t.Fatalf("the driver stopped: %v", err)
	default:
	}
}

func (n *node) halt() {
	n.t.Helper()
	n.stop()
	select {
	case err := <-n.done:
		if err != nil {
			n.t.Fatalf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		n.t.Fatal("the driver did not stop within 10 s")
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (n *node) prepare(ctx context.Context, uid string) *drapb.NodePrepareResourceResponse {
	n.t.Helper()
	sock := filepath.Join(n.c.pluginsDir, n.c.driverName, "dra.sock")
	eventually(n.t, "the DRA socket", func() bool { _, err := os.Stat(sock); return err == nil })
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		n.t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rsp, err := drapb.NewDRAPluginClient(conn).NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{
		Claims: []*drapb.Claim{{Namespace: "ns", Name: "claim", Uid: uid}}})
	if err != nil {
		n.t.Fatalf("NodePrepareResources: %v", err)
	}
	return rsp.Claims[uid]
}

// The kubelet's side of the wire against the real helper: slices published, a claim prepared over
// gRPC, the driver restarted, the claim prepared again onto the same CPUs from the checkpoint.
func TestServeAgainstFakeAPIServer(t *testing.T) {
	dir, err := os.MkdirTemp("", "drar") // short: unix socket paths have at most 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	c := config{driverName: DefaultDriverName, mode: devices.Individual, nodeName: "worker", bind: "127.0.0.1:0",
		stateDir: filepath.Join(dir, "plugins", DefaultDriverName), cdiDir: filepath.Join(dir, "cdi"),
		nriSocket: filepath.Join(dir, "nri.sock"), registryDir: filepath.Join(dir, "registry"), pluginsDir: filepath.Join(dir, "plugins")}
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim", Namespace: "ns", UID: "uid-1"},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{
				{Request: "cpus", Driver: DefaultDriverName, Pool: "worker", Device: "cpu-1"},
				{Request: "cpus", Driver: DefaultDriverName, Pool: "worker", Device: "cpu-5"}}}}},
	}
	n := &node{t: t, c: c, client: fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker", UID: "node-uid"}}, claim)}
	for _, d := range []string{c.registryDir, c.pluginsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.start()
	ctx := context.Background()
	n.published(ctx)
	got := n.prepare(ctx, "uid-1")
	if got.Error != "" || len(got.Devices) != 2 || got.Devices[0].CdiDeviceIds[0] != DefaultDriverName+"/cpu=uid-1" {
		t.Fatalf("prepare: %+v", got)
	}
	n.halt()
	n.start() // a driver restart: the checkpoint is all it keeps
	n.published(ctx)
	again := n.prepare(ctx, "uid-1")
	if again.Error != "" || len(again.Devices) != 2 {
		t.Fatalf("prepare after restart: %+v", again)
	}
	claims, err := checkpoint.Store{Dir: c.stateDir, Driver: c.driverName}.Load()
	if err != nil || len(claims) != 1 || claims[0].CPUs != "1,5" {
		t.Errorf("checkpoint after restart: %+v %v; want claim uid-1 on 1,5", claims, err)
	}
	n.halt()
}
