package ccimanager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	cciv1alpha1 "github.com/cci-conformance/cci-conformance/api/cci/v1alpha1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// The kubelet's journal lines of registrations (klog InfoS messages): the harness's kind backend reads a
// driver's registrations and refusal reasons from them (cci_conformance/kind/cci/node_view.py), whatever the
// driver logs itself.
const (
	LogRegistered   = "CCI driver registered"
	LogRefused      = "CCI driver registration refused"
	LogDeregistered = "CCI driver deregistered"
	// a deregistration while the driver's endpoint answers: kept registered for ReregisterGrace
	LogReregistering = "CCI driver re-registering"
)

// PluginType is the PluginInfo.type a CCI driver advertises to the kubelet's plugin watcher
// (docs/spec.md §1; KEP-3675 "CCI drivers register with the kubelet through the plugin registration
// mechanism"), and SupportedVersion the only protocol version this kubelet speaks.
const (
	PluginType       = "CCIPlugin"
	SupportedVersion = "v1alpha1"
)

// Driver is one registered CCI driver and its gRPC channel.
type Driver struct {
	Name     string
	Endpoint string
	conn     *grpc.ClientConn
	client   cciv1alpha1.CCIDriverClient
	timeout  time.Duration
}

// Registry is the plugin-watcher handler for PluginType. Its three methods have exactly the signatures of
// the kubelet's pluginmanager/cache.PluginHandler, so the kubelet registers it next to the CSI, DRA and
// device-plugin handlers without this package importing the kubelet.
type Registry struct {
	pluginsDir string
	timeout    time.Duration // every driver RPC runs under this deadline (the node profile's rpc_timeout_s)

	mu      sync.RWMutex
	drivers map[string]*Driver
	// known holds every driver name that registered since the kubelet started or that cci_manager_state
	// names: claims of these drivers stay the CCI manager's while the driver is down, so admission refuses
	// them with DriverNotRegistered instead of the DRA manager retrying a DRA plugin that never comes.
	known map[string]bool
	// onRegister runs after a driver (re-)registered: the manager sends the removals it still owes it.
	onRegister func(name string)
}

// NewRegistry accepts driver sockets under pluginsDir (the kubelet's <root-dir>/plugins).
func NewRegistry(pluginsDir string, timeout time.Duration) *Registry {
	return &Registry{pluginsDir: filepath.Clean(pluginsDir), timeout: timeout, drivers: map[string]*Driver{},
		known: map[string]bool{}}
}

// ValidateInfo is the reason a registration is refused, or "" when it is acceptable. The words are the
// embedded node's (watcher.py validate_info), so a driver's registration test reads the same refusal
// from both nodes; the plugin type is checked by the kubelet itself, which routes each type to its
// handler and refuses unknown types with its own message.
func ValidateInfo(name, endpoint string, versions []string, pluginsDir string) string {
	if name == "" || strings.Contains(name, "/") || strings.HasPrefix(name, ".") {
		return "invalid driver name " + pyRepr(name)
	}
	if !contains(versions, SupportedVersion) {
		return fmt.Sprintf("none of the supported versions %s is %s", pyListRepr(versions), pyRepr(SupportedVersion))
	}
	if !filepath.IsAbs(endpoint) || !strings.HasPrefix(endpoint, pluginsDir+string(os.PathSeparator)) {
		return fmt.Sprintf("endpoint %s is not a socket under %s", pyRepr(endpoint), pyRepr(pluginsDir))
	}
	info, err := os.Stat(endpoint)
	if err != nil {
		return fmt.Sprintf("endpoint %s does not exist", pyRepr(endpoint))
	}
	if info.Mode()&os.ModeSocket == 0 {
		return fmt.Sprintf("endpoint %s is not a unix socket", pyRepr(endpoint))
	}
	return ""
}

// ValidatePlugin implements PluginHandler: the kubelet sends the error text back to the driver through
// NotifyRegistrationStatus.
func (r *Registry) ValidatePlugin(name, endpoint string, versions []string) error {
	if reason := ValidateInfo(name, endpoint, versions, r.pluginsDir); reason != "" {
		// Logged at the default verbosity: the kubelet's plugin manager logs a refusal without its reason,
		// and the harness reads registrations from the kubelet's journal, not from the driver's own log.
		klog.InfoS(LogRefused, "driver", name, "endpoint", endpoint, "reason", reason)
		return errors.New(reason)
	}
	return nil
}

// RegisterPlugin implements PluginHandler: it opens the driver's channel. A re-registration under the
// same name replaces the channel; the old one closes after its in-flight calls' deadline (watcher.py
// keeps a re-registering driver without a gap the same way).
func (r *Registry) RegisterPlugin(name, endpoint string, versions []string, _ *time.Duration) error {
	conn, err := grpc.NewClient("unix://"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		err = fmt.Errorf("CCI driver %s: cannot open a channel to %s: %w", pyRepr(name), pyRepr(endpoint), err)
		klog.InfoS(LogRefused, "driver", name, "endpoint", endpoint, "reason", err.Error())
		return err
	}
	driver := &Driver{Name: name, Endpoint: endpoint, conn: conn, client: cciv1alpha1.NewCCIDriverClient(conn), timeout: r.timeout}
	r.mu.Lock()
	old := r.drivers[name]
	r.drivers[name] = driver
	r.known[name] = true
	hook := r.onRegister
	r.mu.Unlock()
	if old != nil {
		time.AfterFunc(r.timeout, func() { _ = old.conn.Close() })
	}
	klog.InfoS(LogRegistered, "driver", name, "endpoint", endpoint)
	if hook != nil {
		hook(name)
	}
	return nil
}

// ReregisterGrace is how long a driver stays registered after a deregistration that came while its CCI
// endpoint still accepts connections. The kubelet's plugin manager deregisters a plugin and registers it
// again one reconcile period later when the registration it holds was superseded: a retried registration
// of a stale socket that a restarted driver re-created succeeds against the new process, then the socket's
// newer entry makes the reconciler register that process a second time. Admissions falling into that gap
// would be refused with DriverNotRegistered although the driver serves (docs/spec.md S3.8).
var ReregisterGrace = 5 * time.Second

// afterFunc schedules the end of a grace (a variable so that tests end it when they choose).
var afterFunc = func(d time.Duration, f func()) { time.AfterFunc(d, f) }

// DeRegisterPlugin implements PluginHandler: the driver's registration socket is gone or superseded. A
// stale deregistration (the endpoint of a channel already replaced) changes nothing; a driver whose CCI
// endpoint still answers stays registered for ReregisterGrace, replaced by its next registration.
func (r *Registry) DeRegisterPlugin(name, endpoint string) {
	r.mu.RLock()
	driver := r.drivers[name]
	r.mu.RUnlock()
	if driver == nil || driver.Endpoint != endpoint {
		return
	}
	if answers(endpoint) {
		klog.InfoS(LogReregistering, "driver", name, "endpoint", endpoint, "grace", ReregisterGrace)
		afterFunc(ReregisterGrace, func() { r.drop(name, driver) })
		return
	}
	r.drop(name, driver)
}

// drop removes driver unless a registration replaced it meanwhile.
func (r *Registry) drop(name string, driver *Driver) {
	r.mu.Lock()
	current := r.drivers[name] == driver
	if current {
		delete(r.drivers, name)
	}
	r.mu.Unlock()
	if current {
		klog.InfoS(LogDeregistered, "driver", name, "endpoint", driver.Endpoint)
		_ = driver.conn.Close()
	}
}

// answers says whether a process accepts connections on the unix socket endpoint now.
func answers(endpoint string) bool {
	conn, err := net.DialTimeout("unix", endpoint, 500*time.Millisecond)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// Get returns a registered driver or nil.
func (r *Registry) Get(name string) *Driver {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.drivers[name]
}

// Remember marks a driver name as a CCI driver's without a registration (a restored record names it).
func (r *Registry) Remember(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.known[name] = true
}

// Known says whether name is a CCI driver's: registered now, registered earlier since the kubelet started,
// or named by a restored record. A deregistered driver stays known (docs/spec.md S3.4).
func (r *Registry) Known(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.known[name]
}

// AnyKnown says whether any CCI driver is known: without one no claim is a CCI claim.
func (r *Registry) AnyKnown() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.known) > 0
}

// Names lists the registered drivers, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.drivers))
	for name := range r.drivers {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Close drops every channel (tests; the kubelet never stops its handlers).
func (r *Registry) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, d := range r.drivers {
		_ = d.conn.Close()
		delete(r.drivers, name)
	}
}

func (d *Driver) rpcFailure(err error, rpc string) *Rejection {
	code := status.Code(err)
	if code == codes.DeadlineExceeded {
		return reject(ReasonDriverTimeout, true, "%s to driver %s did not answer within %ss", rpc, pyRepr(d.Name),
			pyFloat(d.timeout.Seconds()))
	}
	return reject(ReasonDriverUnavailable, true, "%s to driver %s failed: %s: %s", rpc, pyRepr(d.Name),
		pyStatusCode(code), status.Convert(err).Message())
}

// Admit is CCIAdmit under the deadline.
func (d *Driver) Admit(ctx context.Context, req *cciv1alpha1.AdmitRequest) (*cciv1alpha1.AdmitResponse, *Rejection) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	resp, err := d.client.CCIAdmit(ctx, req)
	if err != nil {
		return nil, d.rpcFailure(err, "CCIAdmit")
	}
	return resp, nil
}

// Add is CCIAddContainerResource under the deadline; a reply with err refuses the container.
func (d *Driver) Add(ctx context.Context, req *cciv1alpha1.AddResourceRequest) *Rejection {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	resp, err := d.client.CCIAddContainerResource(ctx, req)
	if err != nil {
		return d.rpcFailure(err, "CCIAddContainerResource")
	}
	if resp.GetErr() != "" {
		return reject(ReasonAddError, true, "driver %s: %s", pyRepr(d.Name), resp.GetErr())
	}
	return nil
}

// Remove is CCIRemoveContainerResource under the deadline; "" on success, else what went wrong (the
// manager keeps the removal owed and sends it again later).
func (d *Driver) Remove(ctx context.Context, req *cciv1alpha1.RemoveResourceRequest) string {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	resp, err := d.client.CCIRemoveContainerResource(ctx, req)
	if err != nil {
		return pyStatusCode(status.Code(err))
	}
	return resp.GetErr()
}
