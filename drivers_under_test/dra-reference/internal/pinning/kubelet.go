package pinning

import (
	"fmt"

	"k8s.io/klog/v2"
	"k8s.io/utils/cpuset"

	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/kubeletstate"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/mutant"
)

// The kubelet's static CPU manager policy pins each container of a Guaranteed pod with integer CPU
// requests to exclusive CPUs. It chooses them at pod admission and records them in its checkpoint
// before the container is created, and it knows nothing of DRA grants (dra-driver-cpu #134). So the
// engine reads that checkpoint: a claim is never prepared on a pinned CPU, the shared pool leaves the
// pinned CPUs out, and a pinned container keeps the cpuset the kubelet gave it.

// SetKubeletState makes the engine honour the pins of the kubelet's checkpoint file; nil (the
// default, and --kubelet-cpu-state="") ignores them. Call it before the engine is used.
func (e *Engine) SetKubeletState(f *kubeletstate.File) {
	if e.mut == mutant.IgnoresKubeletPins {
		return // the fault: the driver as if the kubelet pinned nothing
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.kubelet = f
	_ = e.readPinsLocked() // an unreadable file is logged by File; claims are refused until it reads
}

// readPinsLocked reads the checkpoint afresh. On an error the pins stay the last good ones (File
// returns them) and the error is returned for the callers that must fail closed.
func (e *Engine) readPinsLocked() error {
	if e.kubelet == nil {
		return nil
	}
	s, err := e.kubelet.Read()
	if !s.SamePins(e.pins) {
		e.pins = s
		e.logPinConflictsLocked()
	}
	return err
}

// logPinConflictsLocked reports, once per change of the pins, what the driver cannot prevent: the
// kubelet pinning CPUs already granted to a claim, or every CPU the shared pool had.
func (e *Engine) logPinConflictsLocked() {
	pinned := e.pins.All()
	held, owners := e.heldLocked("")
	klog.InfoS("kubelet CPU manager pins changed", "file", e.kubelet.Path, "policy", e.pins.Policy,
		"pinned", pinned.String(), "containers", len(e.pins.Pinned))
	if both := pinned.Intersection(held); !both.IsEmpty() {
		klog.ErrorS(nil, "the kubelet's static CPU manager policy pinned CPUs granted to claims: both use them "+
			"(the kubelet does not see DRA grants)", "cpus", both.String(), "pinnedTo", e.pins.Owners(both),
			"claims", owners)
	}
	if e.offered.Difference(held).Difference(pinned).IsEmpty() {
		klog.ErrorS(nil, "the kubelet pinned every CPU of the shared pool: shared containers keep the pool "+
			"without the pins subtracted rather than an empty one", "pool", e.offered.Difference(held).String(),
			"pinned", pinned.String())
	}
}

// pinnedLocked is what the kubelet pinned as last read; nothing when the engine does not look.
func (e *Engine) pinnedLocked() cpuset.CPUSet {
	return e.pins.All()
}

// kubeletPinnedLocked says whether the kubelet pinned this container: it is then left as the kubelet
// set it (the kubelet put its exclusive CPUs in the container's create request, and its reconcile loop
// would put them back).
func (e *Engine) kubeletPinnedLocked(c Container) bool {
	return e.pins.Has(c.PodUID, c.ContainerName)
}

// readableLocked re-reads the checkpoint for a preparation and refuses it while the file cannot be
// read: the pins cannot be checked, so fail closed (the last good pins may be stale).
func (e *Engine) readableLocked(who string) error {
	if err := e.readPinsLocked(); err != nil {
		return fmt.Errorf("%s: refused while the kubelet's CPU manager state cannot be read, since CPUs pinned "+
			"by the kubelet's static CPU manager policy cannot be told apart: %w", who, err)
	}
	return nil
}

// pinConflictLocked refuses a claim whose CPUs the kubelet pinned. The error is the claim's: the kubelet
// retries the preparation and shows the message as the pod's event; once the pinned pod is gone (the
// kubelet drops its entries) the preparation succeeds.
func (e *Engine) pinConflictLocked(who string, cpus cpuset.CPUSet) error {
	if both := cpus.Intersection(e.pinnedLocked()); !both.IsEmpty() {
		return fmt.Errorf("%s: CPUs %s are pinned by the kubelet's static CPU manager policy to %s (%s); refusing "+
			"to hand them out twice (the scheduler does not see the kubelet's pins; the claim is prepared once "+
			"that pod is gone)", who, both, e.pins.Owners(both), e.kubelet.Path)
	}
	return nil
}

// RefreshKubeletPins re-reads the checkpoint (called periodically) and, when the pins changed since
// the containers' cpusets were last computed, moves the shared containers at once: a Guaranteed pod
// admitted after a shared container started takes CPUs of the shared pool.
func (e *Engine) RefreshKubeletPins() {
	e.mu.Lock()
	if e.kubelet == nil {
		e.mu.Unlock()
		return
	}
	_ = e.readPinsLocked()
	changed := !e.pins.SamePins(e.applied)
	e.mu.Unlock()
	if changed {
		e.push()
	}
}
