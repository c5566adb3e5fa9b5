// Package pinning holds the node's CPU grants and decides every container's cpuset from them.
package pinning

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"k8s.io/klog/v2"
	"k8s.io/utils/cpuset"

	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/alloc"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/checkpoint"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/kubeletstate"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/mutant"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/topology"
)

// Share is a grouped-mode allocation: Count CPUs of the group device of NUMA node Node.
type Share struct {
	Node  int
	Count int
}

// Request is what a claim's allocation result asks of this driver.
type Request struct {
	UID, Namespace, Name string
	Pods                 []string      // the pods the claim is reserved for (status.reservedFor)
	CPUs                 cpuset.CPUSet // individual mode: the CPUs of the allocated devices
	Shares               []Share       // grouped mode: the consumed capacity of each group device
	Devices              []checkpoint.Device
}

// Update asks the runtime to set a running container's cpuset.
type Update struct {
	ContainerID string
	CPUs        cpuset.CPUSet
}

// Pusher delivers updates to running containers; nil while the runtime is not connected.
type Pusher func([]Update) error

// Engine is the node's grants, the containers it pinned, and the shared pool they imply.
type Engine struct {
	mu         sync.Mutex
	pushMu     sync.Mutex // keeps pushes in the order they were computed
	machine    *topology.Machine
	offered    cpuset.CPUSet // online minus reserved
	mut        mutant.Name
	store      checkpoint.Store
	grants     map[string]*grant
	containers map[string]*container
	pusher     Pusher
	kubelet    *kubeletstate.File // the kubelet's CPU manager checkpoint; nil: its pins are ignored
	pins       kubeletstate.State // what it pinned at the last good read
	applied    kubeletstate.State // the pins the containers' cpusets were last computed with
}

type grant struct {
	claim    checkpoint.Claim
	cpus     cpuset.CPUSet
	released bool   // only the ReleasesOnStop mutant sets it
	owner    string // only the FirstContainerOnly mutant sets it: the container name that took the claim
}

// New loads the checkpoint and checks it against the machine: every granted CPU must still be offered
// and no two grants may overlap. An error means the driver must not start (README "Restarts").
func New(m *topology.Machine, reserved cpuset.CPUSet, store checkpoint.Store, mut mutant.Name) (*Engine, error) {
	e := &Engine{machine: m, offered: m.Online.Difference(reserved), mut: mut, store: store,
		grants: map[string]*grant{}, containers: map[string]*container{}}
	if e.offered.IsEmpty() {
		return nil, fmt.Errorf("--reserved-cpus=%s leaves none of the online CPUs %s to offer", reserved, m.Online)
	}
	if mut == mutant.ForgetsOnRestart {
		return e, nil
	}
	claims, err := store.Load()
	if err != nil {
		return nil, err
	}
	held := cpuset.New()
	for _, c := range claims {
		cpus, err := cpuset.Parse(c.CPUs)
		if err != nil || cpus.IsEmpty() {
			return nil, fmt.Errorf("checkpoint %s: claim %s/%s (%s) has CPUs %q, not a CPU list", store.Path(),
				c.Namespace, c.Name, c.UID, c.CPUs)
		}
		if !cpus.IsSubsetOf(e.offered) {
			return nil, fmt.Errorf("checkpoint %s: claim %s/%s holds CPUs %s, not offered on this machine "+
				"(online %s, reserved %s): was --reserved-cpus or the machine changed with claims prepared?",
				store.Path(), c.Namespace, c.Name, cpus.Difference(e.offered), m.Online, reserved)
		}
		if overlap := held.Intersection(cpus); !overlap.IsEmpty() {
			return nil, fmt.Errorf("checkpoint %s: CPUs %s are held by two claims (one is %s/%s)", store.Path(),
				overlap, c.Namespace, c.Name)
		}
		held = held.Union(cpus)
		e.grants[c.UID] = &grant{claim: c, cpus: cpus}
	}
	return e, nil
}

// SetPusher connects (or, with nil, disconnects) the runtime side.
func (e *Engine) SetPusher(p Pusher) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pusher = p
}

// heldLocked is the union of every grant's CPUs except the one of skip.
func (e *Engine) heldLocked(skip string) (cpuset.CPUSet, string) {
	held, owners := cpuset.New(), []string{}
	for uid, g := range e.grants {
		if uid == skip || g.released {
			continue
		}
		held = held.Union(g.cpus)
		owners = append(owners, fmt.Sprintf("%s/%s", g.claim.Namespace, g.claim.Name))
	}
	sort.Strings(owners)
	return held, strings.Join(owners, ", ")
}

func (e *Engine) ownerOf(cpus cpuset.CPUSet) string {
	for _, g := range e.grants {
		if !g.cpus.Intersection(cpus).IsEmpty() {
			return fmt.Sprintf("claim %s/%s (uid %s)", g.claim.Namespace, g.claim.Name, g.claim.UID)
		}
	}
	return "another claim"
}

// Grant prepares one claim: idempotent for a claim already held (the kubelet asks again after its own
// restart and must get the same CPUs), refused when its CPUs are granted already (double allocation,
// k/k #136269: the driver is the last line of defence), when it would empty the shared pool, or when
// it is reserved for more than one pod (exclusive CPUs serve one pod; KEP-5517 forbids sharing), or
// when the kubelet's static CPU manager policy pinned its CPUs (kubelet.go).
func (e *Engine) Grant(req Request) (cpuset.CPUSet, error) {
	e.mu.Lock()
	if g, ok := e.grants[req.UID]; ok {
		e.mu.Unlock()
		return g.cpus, nil
	}
	cpus, err := e.chooseLocked(req)
	if err != nil {
		e.mu.Unlock()
		return cpuset.New(), err
	}
	e.grants[req.UID] = &grant{cpus: cpus, claim: checkpoint.Claim{UID: req.UID, Namespace: req.Namespace,
		Name: req.Name, CPUs: cpus.String(), Pods: req.Pods, Devices: req.Devices}}
	if err := e.saveLocked(); err != nil {
		delete(e.grants, req.UID)
		e.mu.Unlock()
		return cpuset.New(), err
	}
	e.mu.Unlock()
	e.push() // the shared pool shrank: move running shared containers off the granted CPUs
	return cpus, nil
}

func (e *Engine) chooseLocked(req Request) (cpuset.CPUSet, error) {
	who := fmt.Sprintf("claim %s/%s", req.Namespace, req.Name)
	if len(req.Pods) > 1 && e.mut != mutant.SecondPodAllowed {
		return cpuset.New(), fmt.Errorf("%s is reserved for %d pods (%s): its exclusive CPUs can serve one pod only; "+
			"give each pod its own claim (a ResourceClaimTemplate)", who, len(req.Pods), strings.Join(req.Pods, ", "))
	}
	if err := e.readableLocked(who); err != nil {
		return cpuset.New(), err
	}
	pinned := e.pinnedLocked()
	held, _ := e.heldLocked(req.UID)
	if e.mut == mutant.OverlappingGrants && len(e.grants) > 0 {
		held = cpuset.New() // the fault: under load, the other grants are not looked at
	}
	var cpus cpuset.CPUSet
	switch {
	case len(req.Shares) > 0:
		cpus = cpuset.New()
		for _, s := range req.Shares {
			node := e.machine.Nodes[s.Node].Intersection(e.offered)
			free := node.Difference(held).Difference(cpus).Difference(pinned)
			picked, err := alloc.Pick(e.machine, free, s.Count, e.mut)
			if err != nil {
				if mine := node.Intersection(pinned); !mine.IsEmpty() {
					err = fmt.Errorf("%v; CPUs %s of the node are pinned by the kubelet's static CPU manager policy", err, mine)
				}
				return cpuset.New(), fmt.Errorf("%s: NUMA node %d: %v", who, s.Node, err)
			}
			cpus = cpus.Union(picked)
		}
	case !req.CPUs.IsEmpty():
		if extra := req.CPUs.Difference(e.offered); !extra.IsEmpty() {
			return cpuset.New(), fmt.Errorf("%s: CPUs %s are not offered by this driver (offline or reserved; "+
				"offered %s)", who, extra, e.offered)
		}
		if overlap := req.CPUs.Intersection(held); !overlap.IsEmpty() {
			return cpuset.New(), fmt.Errorf("%s: double allocation: CPUs %s are already granted to %s; refusing "+
				"to hand them out twice (the scheduler allocated them twice, k/k #136269)", who, overlap,
				e.ownerOf(overlap))
		}
		if err := e.pinConflictLocked(who, req.CPUs); err != nil {
			return cpuset.New(), err
		}
		cpus = req.CPUs
	default:
		return cpuset.New(), fmt.Errorf("%s: its allocation names no CPU of this driver", who)
	}
	// The kubelet's pins count here: the pool must keep a CPU neither granted nor pinned.
	if e.offered.Difference(held).Difference(cpus).Difference(pinned).IsEmpty() && e.mut != mutant.EmptyPoolEverything {
		also := ""
		if !pinned.IsEmpty() {
			also = fmt.Sprintf(", pinned by the kubelet's static CPU manager policy %s", pinned)
		}
		return cpuset.New(), fmt.Errorf("%s: granting CPUs %s would leave the shared pool empty (offered %s, "+
			"already granted %s%s); refused so that containers without a claim keep a CPU", who, cpus, e.offered,
			held, also)
	}
	return cpus, nil
}

// Release unprepares a claim; releasing one not held is not an error (the kubelet may ask twice).
func (e *Engine) Release(uid string) error {
	e.mu.Lock()
	g, ok := e.grants[uid]
	if !ok {
		e.mu.Unlock()
		return nil
	}
	delete(e.grants, uid)
	if err := e.saveLocked(); err != nil {
		e.grants[uid] = g
		e.mu.Unlock()
		return err
	}
	e.mu.Unlock()
	e.push() // the shared pool grew: widen running shared containers
	return nil
}

// ForgetGrants drops every grant and moves the containers accordingly: the ResetsOnKubeletRestart
// mutant's answer to a kubelet restart (a correct driver keeps its grants: the kubelet keeps its claims).
func (e *Engine) ForgetGrants() {
	e.mu.Lock()
	e.grants = map[string]*grant{}
	err := e.saveLocked()
	e.mu.Unlock()
	if err != nil {
		klog.ErrorS(err, "checkpoint after dropping the grants")
	}
	e.push()
}

func (e *Engine) saveLocked() error {
	claims := make([]checkpoint.Claim, 0, len(e.grants))
	for _, g := range e.grants {
		claims = append(claims, g.claim)
	}
	return e.store.Save(claims)
}

// Held returns the CPUs of a prepared claim.
func (e *Engine) Held(uid string) (cpuset.CPUSet, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	g, ok := e.grants[uid]
	if !ok {
		return cpuset.New(), false
	}
	return g.cpus, true
}

// Claims returns the prepared claims as the checkpoint records them.
func (e *Engine) Claims() []checkpoint.Claim {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]checkpoint.Claim, 0, len(e.grants))
	for _, g := range e.grants {
		out = append(out, g.claim)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out
}

// SharedPool is where every container without a claim runs: offered CPUs minus every grant and minus
// the CPUs the kubelet pinned, unless the pins would empty it (then the pins are not subtracted: the
// grant check keeps offered − grants non-empty, and a shared container must never get no CPU).
func (e *Engine) SharedPool() cpuset.CPUSet {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sharedLocked()
}

func (e *Engine) sharedLocked() cpuset.CPUSet {
	held, _ := e.heldLocked("")
	pool := e.offered.Difference(held)
	if unpinned := pool.Difference(e.pinnedLocked()); !unpinned.IsEmpty() {
		pool = unpinned
	}
	if e.mut == mutant.SharedKeepsGranted {
		for _, g := range e.grants {
			pool = pool.Union(cpuset.New(g.cpus.List()[0]))
		}
	}
	if pool.IsEmpty() && e.mut == mutant.EmptyPoolEverything {
		return e.offered
	}
	return pool
}
