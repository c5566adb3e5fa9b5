package ccimanager

import (
	"fmt"
	"sync"

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
// a CCI driver (or a grant restored at start): until then the shared pool is every CPU anyway, and a
// policy-none node without CCI drivers (one whose cpusets a DRA CPU driver's NRI plugin sets) keeps the
// unpatched kubelet's behaviour. In coexistence the other containers are the static policy's (ok false).
func (m *Manager) Affinity(podUID, container string) (cpuset.CPUSet, bool) {
	if cpus, ok := m.Effective(podUID, container); ok {
		return cpus, true
	}
	if m.cfg.Mode == ModeAlpha && m.pinShared.Load() {
		return m.pool.Shared(), true
	}
	return cpuset.CPUSet{}, false
}
