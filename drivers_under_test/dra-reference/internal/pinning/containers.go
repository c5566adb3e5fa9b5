package pinning

import (
	"fmt"
	"sort"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/cpuset"

	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/mutant"
)

// PushTimeout bounds one delivery of updates to the runtime.
const PushTimeout = 10 * time.Second

// Container is a running container as the runtime shows it.
type Container struct {
	ID            string
	PodUID        string
	Name          string        // for the logs: namespace/pod/container
	ContainerName string        // its name in the pod spec: with PodUID, the kubelet's checkpoint key
	Claims        []string      // UIDs of the claims whose CDI devices it carries
	CPUs          cpuset.CPUSet // its cpuset now (empty: not known, e.g. never pinned)
}

type container struct {
	Container
}

// desiredLocked is a container's cpuset: its claims' CPUs, or the shared pool without a claim; empty
// for a container the kubelet pinned, which is left as the kubelet set it.
func (e *Engine) desiredLocked(c Container) (cpuset.CPUSet, error) {
	if e.kubeletPinnedLocked(c) {
		return cpuset.New(), nil
	}
	if len(c.Claims) == 0 {
		return e.sharedLocked(), nil
	}
	cpus := cpuset.New()
	for _, uid := range c.Claims {
		g, ok := e.grants[uid]
		if !ok && e.mut == mutant.ResetsOnKubeletRestart {
			continue // the fault: a grant it dropped is taken for no claim at all
		}
		if !ok {
			return cpuset.New(), fmt.Errorf("container %s of pod %s carries claim %s, which this driver has not "+
				"prepared (or prepared and forgot): refusing to guess its CPUs", c.Name, c.PodUID, uid)
		}
		if len(g.claim.Pods) > 0 && !contains(g.claim.Pods, c.PodUID) && e.mut != mutant.SecondPodAllowed {
			return cpuset.New(), fmt.Errorf("container %s of pod %s: claim %s/%s was prepared for pod %s; its "+
				"exclusive CPUs serve one pod only (give each pod its own claim)", c.Name, c.PodUID,
				g.claim.Namespace, g.claim.Name, g.claim.Pods[0])
		}
		if e.mut == mutant.FirstContainerOnly && g.owner != "" && g.owner != c.ContainerName {
			continue // the fault: the claim went to another container of the pod
		}
		cpus = cpus.Union(g.cpus)
	}
	if cpus.IsEmpty() {
		return e.sharedLocked(), nil // only a mutant skips every claim of a claimed container
	}
	if e.mut == mutant.OverlappingGrants {
		for uid, g := range e.grants {
			if !contains(c.Claims, uid) && !g.cpus.IsEmpty() {
				cpus = cpus.Union(cpuset.New(g.cpus.List()[0])) // the fault: a CPU another claim holds
				break
			}
		}
	}
	if e.mut == mutant.ShortClaim && cpus.Size() > 1 {
		cpus = cpus.Difference(cpuset.New(cpus.List()[cpus.Size()-1]))
	}
	return cpus, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Create decides the cpuset of a container being created and remembers the container. A claimed
// container whose claim is unknown or belongs to another pod gets an error: the runtime then fails the
// creation, which is visible, instead of running it on CPUs nobody granted. An empty cpuset means
// "leave it as the runtime has it": a container the kubelet pinned.
func (e *Engine) Create(c Container) (cpuset.CPUSet, []Update, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = e.readPinsLocked() // fresh: the kubelet recorded this container's pins at admission, before its creation
	if e.kubeletPinnedLocked(c) {
		if len(c.Claims) > 0 {
			klog.InfoS("container pinned by the kubelet's static CPU manager policy also carries claims: left on the "+
				"kubelet's CPUs; the claims' CPUs stay granted", "container", c.Name, "claims", c.Claims)
		}
		e.containers[c.ID] = &container{c}
		return cpuset.New(), e.updatesLocked(c.ID), nil
	}
	if e.mut == mutant.FirstContainerOnly {
		for _, uid := range c.Claims {
			if g, ok := e.grants[uid]; ok && g.owner == "" {
				g.owner = c.ContainerName
			}
		}
	}
	cpus, err := e.desiredLocked(c)
	if err != nil {
		return cpuset.New(), nil, err
	}
	for _, uid := range c.Claims {
		// A claim prepared before its pod was known (reservedFor empty) belongs to its first pod.
		if g := e.grants[uid]; len(g.claim.Pods) == 0 {
			g.claim.Pods = []string{c.PodUID}
			if err := e.saveLocked(); err != nil {
				return cpuset.New(), nil, err
			}
		}
	}
	c.CPUs = cpus
	e.containers[c.ID] = &container{c}
	return cpus, e.updatesLocked(c.ID), nil
}

// Stop forgets a stopped container. A restarted container is a new one; a claim's CPUs stay granted
// until the claim is unprepared, never freed by a container's stop (dra-driver-cpu #235).
func (e *Engine) Stop(id string) []Update {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.containers[id]
	delete(e.containers, id)
	if ok && e.mut == mutant.ReleasesOnStop && len(c.Claims) > 0 {
		for _, uid := range c.Claims {
			if g, ok := e.grants[uid]; ok {
				g.released = true
			}
		}
		return e.updatesLocked("")
	}
	return nil
}

// Synchronize replaces the known containers with the runtime's list (on every (re)connect) and
// returns the updates that bring each to its cpuset: containers created while the driver was away
// got no cpuset from it and must be moved now.
func (e *Engine) Synchronize(running []Container) []Update {
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = e.readPinsLocked()
	e.containers = map[string]*container{}
	if e.mut == mutant.NoSyncOnConnect {
		return nil // the fault: the running containers are not looked at
	}
	for _, c := range running {
		e.containers[c.ID] = &container{c}
	}
	return e.updatesLocked("")
}

// updatesLocked lists every known container (but skip) whose cpuset differs from its desired one, and
// records the new cpuset as applied.
func (e *Engine) updatesLocked(skip string) []Update {
	e.applied = e.pins
	var out []Update
	for id, c := range e.containers {
		if id == skip {
			continue
		}
		want, err := e.desiredLocked(c.Container)
		if err != nil {
			klog.ErrorS(err, "container left as it is", "container", id)
			continue
		}
		if want.IsEmpty() || want.Equals(c.CPUs) {
			continue
		}
		c.CPUs = want
		out = append(out, Update{ContainerID: id, CPUs: want})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ContainerID < out[j].ContainerID })
	return out
}

// Containers returns what the engine believes each known container's cpuset is.
func (e *Engine) Containers() map[string]cpuset.CPUSet {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]cpuset.CPUSet{}
	for id, c := range e.containers {
		out[id] = c.CPUs
	}
	return out
}

// push delivers the updates a grant or release made necessary, in order, within PushTimeout.
func (e *Engine) push() {
	e.pushMu.Lock()
	defer e.pushMu.Unlock()
	e.mu.Lock()
	updates, pusher := e.updatesLocked(""), e.pusher
	e.mu.Unlock()
	if len(updates) == 0 || pusher == nil {
		return // not connected: the next Synchronize applies them
	}
	done := make(chan error, 1)
	go func() { done <- pusher(updates) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(PushTimeout):
		err = fmt.Errorf("no answer from the runtime within %s", PushTimeout)
	}
	if err != nil {
		klog.ErrorS(err, "updating running containers failed; retried at the next change or reconnect",
			"updates", len(updates))
		e.forget(updates)
	}
}

// forget marks the cpusets of failed updates unknown, so the next computation sends them again.
func (e *Engine) forget(updates []Update) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, u := range updates {
		if c, ok := e.containers[u.ContainerID]; ok {
			c.CPUs = cpuset.New()
		}
	}
}
