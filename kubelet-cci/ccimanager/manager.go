// Package ccimanager is KEP-3675's CCI manager for kubelet v1.34.12: the plugin-watcher handler for CCI
// drivers, admission through CCIAdmit, CCIAddContainerResource/CCIRemoveContainerResource around the
// container's life, one CPU store shared with the static CPU manager policy, and cci_manager_state.
package ccimanager

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cciv1alpha1 "github.com/cci-conformance/cci-conformance/api/cci/v1alpha1"
	"k8s.io/utils/cpuset"
)

// Modes (docs/spec.md §3): coexistence = static CPU manager policy + CCI sharing one store; alpha =
// policy none + CCI, the KEP's alpha shape, where the CCI manager alone decides exclusive CPUs.
const (
	ModeCoexistence = "coexistence"
	ModeAlpha       = "alpha"
)

// Pool is the CPU manager's side of the one store. The kubelet's static policy implements it over its
// state (cpu_manager_state): a held set becomes the container's assignment and leaves the default
// (shared) set, so the static policy can never hand it to a static-QoS pod.
type Pool interface {
	// Available is what the static policy could still hand out: its default set minus reserved CPUs.
	Available() cpuset.CPUSet
	// Hold records held as the container's assignment and removes it from the default set; holding the
	// same set again is a no-op, holding anything not available is an error.
	Hold(podUID, container string, held cpuset.CPUSet) error
	// Release returns the container's assignment to the default set.
	Release(podUID, container string)
	// Assigned is the union of every container's assignment (static and CCI).
	Assigned() cpuset.CPUSet
	// Shared is the default set: where containers without exclusive CPUs run.
	Shared() cpuset.CPUSet
}

// Claim is a CCI claim as admission needs it (claims arrive as DRA ResourceClaims: see dra.go).
type Claim struct {
	UID        string
	Name       string
	Driver     string
	Parameters []byte // the opaque device config, sent to the driver as resource_handle
}

// Request is one container's admission.
type Request struct {
	PodUID, PodName, Namespace, Container string
	Claim                                 Claim
}

// Config is what the kubelet hands the manager.
type Config struct {
	Mode       string
	PluginsDir string
	Timeout    time.Duration // deadline of every driver RPC
	Topology   Topology
	StatePath  string                  // cci_manager_state, named in restore errors
	Save       func(*Checkpoint) error // the kubelet's checkpoint manager CreateCheckpoint
}

type key struct{ pod, container string }

// Manager is the CCI manager.
type Manager struct {
	cfg      Config
	Registry *Registry
	pool     Pool

	mu      sync.Mutex
	records map[key]Record
	pending []Owed
	// unconfirmed holds the container id of a CCIAddContainerResource that failed (an err, a deadline, the
	// driver gone): the Add may or may not have reached the driver, so the container's removal sends that id
	// and the empty one (docs/spec.md S3.4). In memory only: a kubelet restart removes such a container as
	// gone-while-down, which sends both ids as well.
	unconfirmed map[key]string

	// pinShared (alpha only) turns on shared-pool cpusets for containers without a grant (Affinity, alpha.go);
	// it is set once, when the alpha mode wakes up (activate)
	pinShared atomic.Bool
	wake      activation
	calls     *callLog // the per-call record (calllog.go), nil when off
}

// New makes a manager; Start restores its checkpoint.
func New(cfg Config, pool Pool) *Manager {
	m := &Manager{cfg: cfg, Registry: NewRegistry(cfg.PluginsDir, cfg.Timeout), pool: pool, records: map[key]Record{},
		unconfirmed: map[key]string{}, calls: openCallLog()}
	m.Registry.onRegister = func(string) {
		m.activate() // alpha: a CCI driver is here, every container gets its cpuset (alpha.go)
		go m.FlushOwed(context.Background())
	}
	return m
}

func (m *Manager) save() error {
	data := StateData{Mode: m.cfg.Mode, Pending: append([]Owed(nil), m.pending...)}
	for _, r := range m.records {
		data.Containers = append(data.Containers, r)
	}
	if err := m.cfg.Save(NewCheckpoint(m.cfg.StatePath, data)); err != nil {
		return fmt.Errorf("writing %s: %w", CheckpointName, err)
	}
	return nil
}

// IsCCIContainer says whether the manager holds a grant for the container.
func (m *Manager) IsCCIContainer(podUID, container string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.records[key{podUID, container}]
	return ok
}

// Admit asks the claim's driver for CPUs (CCIAdmit) and, when the reply validates, holds them in the
// store. A *Rejection says why not; the kubelet refuses the pod with its Reason.
func (m *Manager) Admit(ctx context.Context, req Request) (Grant, error) {
	start := time.Now()
	grant, err := m.admit(ctx, req)
	took := time.Since(start)
	observeAdmission(took, outcomeOf(err))
	m.calls.record(CallAdmission, req.PodUID, req.Container, took, outcomeOf(err))
	return grant, err
}

func (m *Manager) admit(ctx context.Context, req Request) (Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.records[key{req.PodUID, req.Container}]; ok { // admitted already (a kubelet restart re-admits)
		return grantOf(r), nil
	}
	driver := m.Registry.Get(req.Claim.Driver)
	if driver == nil {
		have := strings.Join(m.Registry.Names(), ", ")
		if have == "" {
			have = "none"
		}
		return Grant{}, reject(ReasonDriverNotRegistered, false, "claim %s needs driver %s; registered: %s",
			pyRepr(req.Claim.Name), pyRepr(req.Claim.Driver), have)
	}
	// intent first: a kubelet killed during CCIAdmit rolls the claim back at restart (docs/spec.md §3.5)
	intent := Owed{Driver: driver.Name, Namespace: req.Namespace, ClaimUID: req.Claim.UID, ClaimName: req.Claim.Name,
		PodUID: req.PodUID, Container: req.Container, Why: "admission"}
	m.pending = append(m.pending, intent)
	if err := m.save(); err != nil {
		m.dropOwed(intent)
		return Grant{}, err
	}
	available := m.pool.Available()
	handle, err := pyJSON(req.Claim.Parameters)
	if err != nil { // not JSON: forwarded as is, refusing it is the driver's job (docs/spec.md §2)
		handle = string(req.Claim.Parameters)
	}
	call := time.Now()
	resp, rej := driver.Admit(ctx, &cciv1alpha1.AdmitRequest{
		Namespace: req.Namespace, ClaimUid: req.Claim.UID, ClaimName: req.Claim.Name, AvailableCpus: available.String(),
		Pod: req.PodUID, Container: req.Container, ResourceHandle: handle,
	})
	var grant Grant
	if rej == nil {
		var shape *ClaimShape
		if parsed, ok := ParseClaimShape([]byte(handle)); ok {
			shape = &parsed
		}
		grant, rej = Validate(resp, available, shape, m.cfg.Topology)
	}
	took := time.Since(call)
	observeDriverAdmit(driver.Name, took, outcomeOf(errOrNil(rej)))
	m.calls.record(CallAdmit, req.PodUID, req.Container, took, outcomeOf(errOrNil(rej)))
	if rej == nil {
		if err := holdIfAny(m.pool, req.PodUID, req.Container, grant.Held()); err != nil {
			rej = reject(ReasonInvalidReply, true, "the CPU manager refused the grant: %v", err)
		}
	}
	if rej != nil {
		if !rej.DriverMayHold { // the driver said no: nothing to roll back
			m.dropOwed(intent)
			_ = m.save()
		} else {
			m.flushOne(ctx, driver, intent)
		}
		return Grant{}, rej
	}
	m.records[key{req.PodUID, req.Container}] = recordOf(req, grant, driver.Name)
	m.dropOwed(intent)
	if err := m.save(); err != nil {
		return Grant{}, err
	}
	return grant, nil
}

// ContainerCreated sends CCIAddContainerResource once the runtime created the container (KEP-3675 flow
// "Add": the driver learns the container id and cgroup). It is a no-op for containers without a grant.
func (m *Manager) ContainerCreated(ctx context.Context, podUID, container, containerID, cgroup string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.records[key{podUID, container}]
	if !ok {
		return nil
	}
	driver := m.Registry.Get(r.Driver)
	if driver == nil {
		return reject(ReasonDriverNotRegistered, true, "driver %s went away before CCIAddContainerResource", pyRepr(r.Driver))
	}
	call := time.Now()
	rej := driver.Add(ctx, &cciv1alpha1.AddResourceRequest{Cgroup: cgroup, Pod: podUID, Container: container,
		ContainerId: containerID})
	outcome := "added"
	if rej != nil {
		outcome = rej.Reason
	}
	took := time.Since(call)
	observeDriverAdd(driver.Name, took, outcome)
	m.calls.record(CallAdd, podUID, container, took, outcome)
	if rej != nil {
		m.unconfirmed[key{podUID, container}] = containerID
		return rej
	}
	delete(m.unconfirmed, key{podUID, container})
	r.ContainerID = containerID
	m.records[key{podUID, container}] = r
	return m.save()
}

// ContainerRemoved forgets a CCI container (the store first, then the driver is told: a kubelet killed in
// between sends the removal after its restart, docs/spec.md §3.5). No-op for other containers.
func (m *Manager) ContainerRemoved(ctx context.Context, podUID, container string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeLocked(ctx, key{podUID, container})
}

// ContainerRemovedByID is ContainerRemoved for the kubelet's PostStopContainer, which knows only the id.
func (m *Manager) ContainerRemovedByID(ctx context.Context, containerID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, r := range m.records {
		if containerID != "" && r.ContainerID == containerID {
			m.removeLocked(ctx, k)
		}
	}
}

// RemoveStale forgets the CCI containers of pods that are no longer active (the CPU manager's
// removeStaleState does the same for its assignments).
func (m *Manager) RemoveStale(ctx context.Context, activePods map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.records {
		if !activePods[k.pod] {
			m.removeLocked(ctx, k)
		}
	}
}

func (m *Manager) removeLocked(ctx context.Context, k key) {
	r, ok := m.records[k]
	if !ok {
		return
	}
	delete(m.records, k)
	m.pool.Release(k.pod, k.container)
	owed := Owed{Driver: r.Driver, Namespace: r.Namespace, ClaimUID: r.ClaimUID, ClaimName: r.ClaimName,
		ContainerID: r.ContainerID, PodUID: r.PodUID, Container: r.Container, Why: "removal"}
	if id, ok := m.unconfirmed[k]; ok {
		owed.ContainerID, owed.Why = id, whyUnconfirmed
		delete(m.unconfirmed, k)
	}
	m.pending = append(m.pending, owed)
	_ = m.save()
	if driver := m.Registry.Get(r.Driver); driver != nil {
		m.flushOne(ctx, driver, owed)
	}
}

// whyGone marks the removal owed for a container the runtime lost while the kubelet was down; whyUnconfirmed
// the removal of a container whose CCIAddContainerResource failed (Manager.unconfirmed).
const (
	whyGone        = "gone-while-down"
	whyUnconfirmed = "add-unconfirmed"
)

// removeIDs are the container_id values an owed entry sends (docs/spec.md S1.7, S3.6): an admission rolled
// back before any container existed is removed with "", a removed container with its id, and a container
// gone while the kubelet was down with its id and then "": the kubelet may have died between recording the
// container id and CCIAddContainerResource, so the driver may hold the admission un-added.
func removeIDs(owed Owed) []string {
	switch owed.Why {
	case "admission":
		return []string{""}
	case whyGone, whyUnconfirmed:
		return []string{owed.ContainerID, ""}
	}
	return []string{owed.ContainerID}
}

// flushOne sends the CCIRemoveContainerResource calls an entry owes and drops it once the driver
// acknowledged every one (a repeated Remove is harmless, S1.7, so a partly sent entry is sent again whole).
func (m *Manager) flushOne(ctx context.Context, driver *Driver, owed Owed) {
	for _, id := range removeIDs(owed) {
		if msg := driver.Remove(ctx, &cciv1alpha1.RemoveResourceRequest{Namespace: owed.Namespace, ClaimUid: owed.ClaimUID,
			ClaimName: owed.ClaimName, ContainerId: id}); msg != "" {
			return // stays owed: sent again when the driver registers again or at the next FlushOwed
		}
	}
	m.dropOwed(owed)
	_ = m.save()
}

// FlushOwed sends every owed removal whose driver is registered.
func (m *Manager) FlushOwed(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, owed := range append([]Owed(nil), m.pending...) {
		if driver := m.Registry.Get(owed.Driver); driver != nil {
			m.flushOne(ctx, driver, owed)
		}
	}
}

func (m *Manager) dropOwed(owed Owed) {
	for i, o := range m.pending {
		if o == owed {
			m.pending = append(m.pending[:i], m.pending[i+1:]...)
			return
		}
	}
}

// Pending lists the removals still owed (tests and the kubelet's debug log).
func (m *Manager) Pending() []Owed {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Owed(nil), m.pending...)
}

// Effective is the cpuset the runtime must give a CCI container (docs/spec.md §3.3): its exclusive CPUs
// plus its SHARED groups minus what others hold, or the shared pool when that is empty. The kubelet
// applies it at container create and its CPU manager reconcile loop keeps it applied.
func (m *Manager) Effective(podUID, container string) (cpuset.CPUSet, bool) {
	m.mu.Lock()
	r, ok := m.records[key{podUID, container}]
	m.mu.Unlock()
	if !ok {
		return cpuset.CPUSet{}, false
	}
	g := grantOf(r)
	cpus := g.Exclusive
	if !g.Shared.IsEmpty() {
		others := m.pool.Assigned().Difference(g.Held())
		cpus = cpus.Union(g.Shared.Difference(others))
	}
	if cpus.IsEmpty() {
		return m.pool.Shared(), true
	}
	return cpus, true
}

func grantOf(r Record) Grant {
	g := Grant{Exclusive: mustParse(r.Exclusive), Withheld: mustParse(r.Withheld), Shared: mustParse(r.Shared)}
	for _, gr := range r.Groups {
		g.Groups = append(g.Groups, Group{CPUs: mustParse(gr.CPUSet), Exclusive: gr.Exclusive})
	}
	return g
}

func errOrNil(r *Rejection) error {
	if r == nil {
		return nil
	}
	return r
}

func outcomeOf(err error) string {
	var rej *Rejection
	switch {
	case err == nil:
		return "admitted"
	case errors.As(err, &rej):
		return rej.Reason
	default:
		return "error"
	}
}

// holdIfAny makes a grant's held CPUs the container's cpu_manager_state assignment. A grant that holds
// nothing (SHARED groups only) gets no entry: the static policy writes an entry only for a container it
// gave CPUs of its own, and docs/spec.md S3.5 makes only held sets entries, as the embedded node does.
func holdIfAny(pool Pool, podUID, container string, held cpuset.CPUSet) error {
	if held.IsEmpty() {
		return nil
	}
	return pool.Hold(podUID, container, held)
}
