package ccimanager

import "fmt"

// Restore loads cci_manager_state at kubelet start and reconciles it with the runtime (KEP-3675: the
// kubelet "must be able to recover its CCI state after a restart"). load is the kubelet's checkpoint
// manager GetCheckpoint; notFound says its error means "no file yet" (a first start). running holds
// the ids of the containers the runtime still runs. A container that went away while the kubelet was
// down is released: its CPUs return to the pool now, and its driver is told as soon as it registers.
// Any other problem with the file stops the kubelet with the embedded node's advice.
func (m *Manager) Restore(load func(*Checkpoint) error, notFound func(error) bool, running map[string]bool) error {
	cp := NewCheckpoint(m.cfg.StatePath, StateData{})
	if err := load(cp); err != nil {
		if !notFound(err) {
			return err
		}
		if m.dormant() { // alpha writes nothing until it wakes up (alpha.go)
			return nil
		}
		return m.saveLocked()
	}
	if cp.Data.Mode != m.cfg.Mode && (len(cp.Data.Containers) > 0 || len(cp.Data.Pending) > 0) {
		// an empty file of the other mode holds nothing any driver or container depends on: accepted, so a
		// policy change needs only the CPU manager's own procedure (remove cpu_manager_state), docs/spec.md S3.1
		return RestoreError(m.cfg.StatePath, fmt.Sprintf("unusable content (configured mode %s differs from checkpoint mode %s)",
			pyRepr(m.cfg.Mode), pyRepr(cp.Data.Mode)))
	}
	if err := m.restoreRecords(cp.Data, running); err != nil {
		return err
	}
	if m.cfg.Mode == ModeAlpha && len(m.Records()) > 0 { // grants are held: the shared pool is not every CPU
		m.wakeUp()
	}
	return m.saveLocked() // a file that exists is kept current, also while alpha sleeps (owed removals)
}

func (m *Manager) restoreRecords(data StateData, running map[string]bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending = append([]Owed(nil), data.Pending...)
	for _, o := range data.Pending {
		m.Registry.Remember(o.Driver)
	}
	for _, r := range data.Containers {
		m.Registry.Remember(r.Driver)
		k := key{r.PodUID, r.Container}
		if r.ContainerID != "" && !running[r.ContainerID] {
			// gone while the kubelet was down: owe the driver its removal, give the CPUs back
			m.pending = append(m.pending, Owed{Driver: r.Driver, Namespace: r.Namespace, ClaimUID: r.ClaimUID,
				ClaimName: r.ClaimName, ContainerID: r.ContainerID, PodUID: r.PodUID, Container: r.Container, Why: whyGone})
			m.pool.Release(r.PodUID, r.Container)
			continue
		}
		// cpu_manager_state was restored by the CPU manager before us: it must already hold the grant
		if err := holdIfAny(m.pool, r.PodUID, r.Container, grantOf(r).Held()); err != nil {
			return RestoreError(m.cfg.StatePath, fmt.Sprintf("containers %s/%s: cpu_manager_state disagrees (%v)",
				r.PodUID, r.Container, err))
		}
		m.records[k] = r
	}
	return nil
}

func (m *Manager) saveLocked() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.save()
}

// Records lists the grants the manager holds (tests and the pod-resources view).
func (m *Manager) Records() []Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Record, 0, len(m.records))
	for _, r := range m.records {
		out = append(out, r)
	}
	return out
}
