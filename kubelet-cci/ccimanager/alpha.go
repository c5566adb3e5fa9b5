package ccimanager

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/klog/v2"
	"k8s.io/utils/cpuset"
)

// OwnPool is the store of the alpha mode (CPU manager policy none + CCI, KEP-3675 l.109-111). The none
// policy keeps no assignments, and its cpu_manager_state must stay the none policy's file byte for byte
// (docs/spec.md S3.5), so the CCI manager holds its grants here, in memory, with cci_manager_state as
// their only record: Restore holds them again at every kubelet start.
type OwnPool struct {
	online, reserved cpuset.CPUSet

	mu   sync.Mutex
	held map[key]cpuset.CPUSet
}

var _ Pool = (*OwnPool)(nil)

// NewOwnPool makes the alpha store of a machine: online is every CPU the kubelet's topology sees, reserved
// the kubelet's reservedSystemCPUs (--reserved-cpus), which availableCpus never offers (docs/spec.md S3.2).
func NewOwnPool(online, reserved cpuset.CPUSet) *OwnPool {
	return &OwnPool{online: online, reserved: reserved, held: map[key]cpuset.CPUSet{}}
}

func (p *OwnPool) heldLocked() cpuset.CPUSet {
	all := cpuset.New()
	for _, s := range p.held {
		all = all.Union(s)
	}
	return all
}

// Available is availableCpus (docs/spec.md S3.2): online - reserved - held.
func (p *OwnPool) Available() cpuset.CPUSet {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.online.Difference(p.reserved).Difference(p.heldLocked())
}

// Hold records a grant; the same set again is a no-op (a restart re-holds what cci_manager_state names), any
// CPU that is reserved, offline or held by another container is refused.
func (p *OwnPool) Hold(podUID, container string, held cpuset.CPUSet) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := key{podUID, container}
	if cur, ok := p.held[k]; ok {
		if cur.Equals(held) {
			return nil
		}
		return fmt.Errorf("container %s/%s holds %s, not %s", podUID, container, cur, held)
	}
	available := p.online.Difference(p.reserved).Difference(p.heldLocked())
	if !held.IsSubsetOf(available) {
		return fmt.Errorf("CPUs %s are not available (available: %s)", held.Difference(available), available)
	}
	p.held[k] = held
	return nil
}

// Release forgets the container's grant; its CPUs are back in the shared pool.
func (p *OwnPool) Release(podUID, container string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.held, key{podUID, container})
}

// Assigned is every held CPU (exclusive groups and withheld siblings of every CCI container).
func (p *OwnPool) Assigned() cpuset.CPUSet {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.heldLocked()
}

// Shared is the shared pool, online - held. Reserved CPUs stay in it, as they stay in the static policy's
// default set without strict-cpu-reservation, an option the none policy does not take (docs/spec.md S3.2).
func (p *OwnPool) Shared() cpuset.CPUSet {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.online.Difference(p.heldLocked())
}

// Affinity is the cpuset the kubelet gives a container at create (GetCPUAffinity) and keeps applying in its
// CPU manager's reconcile loop. A CCI container runs on Effective. In alpha every other container runs on
// the shared pool (docs/spec.md S3.1, S3.3: the embedded node's rule), because the none policy sets no
// cpuset and would leave it on every CPU, CCI grants included. That starts with the first registration of
// a CCI driver (or a grant restored at start), when the alpha mode wakes up (activation below): until then
// the shared pool is every CPU anyway, and a policy-none node without CCI drivers (one whose cpusets a DRA
// CPU driver's NRI plugin sets) keeps the unpatched kubelet's behaviour. In coexistence the other
// containers are the static policy's (ok false).
func (m *Manager) Affinity(podUID, container string) (cpuset.CPUSet, bool) {
	if cpus, ok := m.Effective(podUID, container); ok {
		return cpus, true
	}
	if m.cfg.Mode == ModeAlpha && m.pinShared.Load() {
		return m.pool.Shared(), true
	}
	return cpuset.CPUSet{}, false
}

// Held is what the pod-resources API lists for a container (docs/spec.md S3.7): the CPUs its grant holds,
// exclusive groups and withheld siblings; ok false for a container without a grant or with SHARED groups only.
// The kubelet asks it in alpha (patch 0001, GetExclusiveCPUs), where the none policy's state has no assignment;
// in coexistence the static policy's state holds the grant already (Hold).
func (m *Manager) Held(podUID, container string) (cpuset.CPUSet, bool) {
	m.mu.Lock()
	r, ok := m.records[key{podUID, container}]
	m.mu.Unlock()
	if !ok {
		return cpuset.CPUSet{}, false
	}
	held := grantOf(r).Held()
	return held, !held.IsEmpty()
}

// activation is the alpha mode's wake-up. A policy-none kubelet without CCI drivers must stay the unpatched
// none kubelet in everything observable (docs/spec.md S3.1): another agent, e.g. a DRA CPU driver's NRI
// plugin, may own its cpusets, and its pod-resources API reports no allocatable CPUs. So the alpha mode
// sleeps until it has something to do: the first CCI driver registration, or a grant restored at start.
type activation struct {
	mu    sync.Mutex
	awake bool
	hook  func()
}

// OnWake sets what the kubelet does when the alpha mode wakes up (the CPU manager's allocatable CPUs and
// reconcile loop, patch 0001 NewCCIAlpha); set after waking, it runs at once. It runs exactly once.
func (m *Manager) OnWake(hook func()) {
	m.wake.mu.Lock()
	awake := m.wake.awake
	if !awake {
		m.wake.hook = hook
	}
	m.wake.mu.Unlock()
	if awake && hook != nil {
		hook()
	}
}

// Awake says whether the alpha mode woke up (always false in coexistence, which never sleeps).
func (m *Manager) Awake() bool {
	return m.pinShared.Load()
}

func (m *Manager) dormant() bool {
	return m.cfg.Mode == ModeAlpha && !m.pinShared.Load()
}

// wakeUp turns pinning on and runs the kubelet's hook, once; it says whether this call woke the mode.
func (m *Manager) wakeUp() bool {
	if m.cfg.Mode != ModeAlpha {
		return false
	}
	m.wake.mu.Lock()
	if m.wake.awake {
		m.wake.mu.Unlock()
		return false
	}
	m.wake.awake = true
	hook := m.wake.hook
	m.wake.hook = nil
	m.wake.mu.Unlock()
	m.pinShared.Store(true)
	if hook != nil {
		hook()
	}
	return true
}

// activate wakes the alpha mode on a CCI registration; cci_manager_state is first written now (Restore
// writes none while the mode sleeps), so a node that never saw a CCI driver never has the file.
func (m *Manager) activate() {
	if !m.wakeUp() {
		return
	}
	if err := m.saveLocked(); err != nil {
		klog.ErrorS(err, "CCI alpha: writing the checkpoint at wake-up")
	}
}

// Wake wakes the alpha mode now (the kubelet, at start, on a node whose unpatched none policy cannot run).
func (m *Manager) Wake() {
	m.activate()
}

// CgroupCPUs is the set of CPUs the node's root cpuset cgroup allows (cgroup v2 cpuset.cpus.effective, else
// v1 cpuset.effective_cpus, under cgroupFS), ok false when neither is readable. A policy-none kubelet writes
// every CPU of its topology into the kubepods cpuset while it has no allocatable CPUs; a CPU outside this
// set makes that write fail and the kubelet exit (docs/spec.md S3.1: a worker that shows the kubelet a
// faked, larger machine), so there the alpha mode wakes at start instead of sleeping.
func CgroupCPUs(cgroupFS string, read func(string) ([]byte, error)) (cpuset.CPUSet, bool) {
	for _, name := range []string{"cpuset.cpus.effective", "cpuset/cpuset.effective_cpus"} {
		blob, err := read(filepath.Join(cgroupFS, name))
		if err != nil {
			continue
		}
		if set, err := cpuset.Parse(strings.TrimSpace(string(blob))); err == nil && !set.IsEmpty() {
			return set, true
		}
	}
	return cpuset.CPUSet{}, false
}
