// Command dra-reference is the harness's reference DRA CPU driver: a DRA kubelet plugin and an NRI plugin in one process.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	"k8s.io/utils/cpuset"

	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/checkpoint"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/devices"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/kubeletstate"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/kubeplugin"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/mutant"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/nriplugin"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/pinning"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/topology"
)

// DefaultDriverName is the driver (and DeviceClass, and attribute domain) name unless --driver-name says otherwise.
const DefaultDriverName = "dra-reference.cci-conformance.example"

type config struct {
	driverName, mode, groupBy, reserved, nodeName, bind, hostRoot            string
	stateDir, cdiDir, nriSocket, registryDir, pluginsDir, kubeconfig, mutant string
	kubeletState                                                             string // "" : the kubelet's pins are ignored
}

// kubeletStatePoll is how often the kubelet's CPU manager checkpoint is re-read: a Guaranteed pod
// admitted beside running shared containers takes CPUs of their pool, and they must move off them.
const kubeletStatePoll = 2 * time.Second

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("dra-reference", flag.ContinueOnError)
	klog.InitFlags(fs) // --v and the other klog flags
	var c config
	fs.StringVar(&c.driverName, "driver-name", DefaultDriverName, "DRA driver name: also the DeviceClass claims name, the attribute domain and the CDI vendor")
	fs.StringVar(&c.mode, "cpu-device-mode", devices.Individual, "individual (one device per CPU) or grouped (one device per NUMA node with consumable capacity)")
	fs.StringVar(&c.groupBy, "group-by", "numanode", "grouped mode: what a group device covers (numanode only)")
	fs.StringVar(&c.reserved, "reserved-cpus", "", "CPUs (a Linux cpulist) never published and never in the shared pool")
	fs.StringVar(&c.nodeName, "hostname-override", os.Getenv("NODE_NAME"), "the node's name (default $NODE_NAME, else the hostname)")
	fs.StringVar(&c.bind, "bind-address", ":8080", "address of /healthz (200 once slices are published and NRI is connected)")
	fs.StringVar(&c.hostRoot, "host-root", os.Getenv("HOST_ROOT"), "where the host's / is mounted: sysfs is read from <host-root>/sys (default $HOST_ROOT, else /)")
	fs.StringVar(&c.stateDir, "state-dir", "", "where the checkpoint lives (default <kubelet-plugins-dir>/<driver-name>)")
	fs.StringVar(&c.cdiDir, "cdi-dir", "/var/run/cdi", "where the per-claim CDI specs are written")
	fs.StringVar(&c.nriSocket, "nri-socket", "/var/run/nri/nri.sock", "the runtime's NRI socket")
	fs.StringVar(&c.registryDir, "kubelet-registry-dir", kubeletplugin.KubeletRegistryDir, "the kubelet's plugin registration directory")
	fs.StringVar(&c.pluginsDir, "kubelet-plugins-dir", kubeletplugin.KubeletPluginsDir, "the kubelet's plugin directory")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file (default: the in-cluster service account)")
	fs.StringVar(&c.kubeletState, "kubelet-cpu-state", "", "the kubelet's CPU manager checkpoint, whose static-policy pins "+
		"are never handed out (default <host-root>/"+kubeletstate.RelPath+"; an empty value ignores the pins)")
	fs.StringVar(&c.mutant, "mutant", "", "test only: break one rule on purpose (README \"Mutants\")")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q (flags only; is the program name repeated in the command?)", fs.Arg(0))
	}
	if c.groupBy != "numanode" {
		return c, fmt.Errorf("--group-by=%q: only numanode is supported", c.groupBy)
	}
	if c.nodeName == "" {
		host, err := os.Hostname()
		if err != nil {
			return c, fmt.Errorf("no --hostname-override and no hostname: %w", err)
		}
		c.nodeName = host
	}
	if c.hostRoot == "" {
		c.hostRoot = "/"
	}
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "kubelet-cpu-state" })
	if !explicit {
		// Below the host root, as sysfs: the DaemonSet mounts the node's /var/lib/kubelet there.
		c.kubeletState = filepath.Join(c.hostRoot, kubeletstate.RelPath)
	}
	if c.stateDir == "" {
		c.stateDir = filepath.Join(c.pluginsDir, c.driverName)
	}
	return c, nil
}

func main() {
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "dra-reference:", err)
		os.Exit(2)
	}
	if err := run(c); err != nil {
		klog.ErrorS(err, "driver stopped")
		klog.Flush()
		os.Exit(1)
	}
}

func run(c config) error {
	mut, err := mutant.Parse(c.mutant)
	if err != nil {
		return err
	}
	if mut != mutant.None {
		klog.InfoS("MUTANT: this driver breaks one rule on purpose", "mutant", mut)
	}
	reserved, err := cpuset.Parse(c.reserved)
	if err != nil {
		return fmt.Errorf("--reserved-cpus=%q is not a CPU list (e.g. 0-1,8): %w", c.reserved, err)
	}
	machine, err := topology.Read(filepath.Join(c.hostRoot, "sys"))
	if err != nil {
		return err
	}
	devs, err := devices.List(machine, c.driverName, reserved, c.mode, mut)
	if err != nil {
		return err
	}
	engine, err := pinning.New(machine, reserved, checkpoint.Store{Dir: c.stateDir, Driver: c.driverName}, mut)
	if err != nil {
		return err
	}
	if c.kubeletState != "" {
		engine.SetKubeletState(&kubeletstate.File{Path: c.kubeletState})
	}
	klog.InfoS("starting", "driver", c.driverName, "node", c.nodeName, "mode", c.mode, "online", machine.Online.String(),
		"reserved", reserved.String(), "devices", len(devs), "claimsRestored", len(engine.Claims()),
		"kubeletCPUState", c.kubeletState)

	restCfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return fmt.Errorf("API server config: %w", err)
	}
	restCfg.Timeout = 30 * time.Second // every API call the helper makes has a deadline
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return serve(ctx, c, client, devs, engine, mut)
}

// serve runs the NRI plugin, the kubelet plugin and /healthz until ctx ends or a fatal error.
func serve(ctx context.Context, c config, client kubernetes.Interface,
	devs []resourceapi.Device, engine *pinning.Engine, mut mutant.Name) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The helper listens in <plugins>/<driver> but does not create it; on a fresh node it is absent.
	dataDir := filepath.Join(c.pluginsDir, c.driverName)
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return fmt.Errorf("plugin dir %s: %w", dataDir, err)
	}
	nri := &nriplugin.Plugin{Engine: engine, DriverName: c.driverName}
	plugin := &kubeplugin.Plugin{Engine: engine, DriverName: c.driverName, CDIDir: c.cdiDir, Mutant: mut,
		Fatal: func(err error) { cancel(err) }}
	// NRI first: claimed containers can only be created once the plugin pins them.
	go nri.Run(ctx, c.nriSocket, "dra-reference", "10")
	go func() {
		tick := time.NewTicker(kubeletStatePoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				engine.RefreshKubeletPins() // a no-op when the pins are ignored
			}
		}
	}()
	helper, err := kubeletplugin.Start(ctx, plugin,
		kubeletplugin.DriverName(c.driverName), kubeletplugin.NodeName(c.nodeName), kubeletplugin.KubeClient(client),
		kubeletplugin.RegistrarDirectoryPath(c.registryDir),
		kubeletplugin.PluginDataDirectoryPath(dataDir),
		kubeletplugin.HealthService(false))
	if err != nil {
		return fmt.Errorf("start the kubelet plugin: %w", err)
	}
	defer helper.Stop()
	if mut == mutant.ResetsOnKubeletRestart || mut == mutant.StaleUnprepares {
		go watchRegistrations(ctx, func() (any, bool) {
			s := helper.RegistrationStatus()
			return s, s != nil
		}, plugin.KubeletRegisteredAgain)
	}
	if err := helper.PublishResources(ctx, devices.Resources(c.nodeName, devs)); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while the first publication was still syncing
		}
		return fmt.Errorf("publish ResourceSlices: %w", err)
	}
	serveHealth(ctx, c.bind, func() bool {
		status := helper.RegistrationStatus()
		return nri.Connected() && status != nil && status.PluginRegistered
	})
	<-ctx.Done()
	if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
		return cause
	}
	return nil
}

// serveHealth answers /healthz with 200 when ready() holds: the readiness probe the harness waits for.
func serveHealth(ctx context.Context, addr string, ready func() bool) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "not ready: slices unpublished, NRI not connected or kubelet registration pending", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
			klog.ErrorS(err, "healthz server stopped", "address", addr)
		}
	}()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
}

// registrationPoll is how often the two mutants that act on a kubelet restart look for a new registration.
const registrationPoll = 50 * time.Millisecond

// watchRegistrations calls again() for each registration by the kubelet after the first. The helper keeps
// the last NotifyRegistrationStatus request, a new object per registration, so a change of it is one.
func watchRegistrations(ctx context.Context, status func() (any, bool), again func()) {
	tick := time.NewTicker(registrationPoll)
	defer tick.Stop()
	var last any
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now, registered := status()
		if !registered || now == last {
			continue
		}
		if last != nil {
			again()
		}
		last = now
	}
}
