package main

// The CCIDriver and Registration services (docs/spec.md S1.1-S1.8). One mutex serialises every call:
// admissions are mutually exclusive transactions (KEP-3675 l.922, S1.8).

import (
	"context"
	"fmt"
	"log"
	"sync"

	cci "github.com/cci-conformance/cci-conformance/api/cci/v1alpha1"
	"google.golang.org/grpc/status"
	registration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Driver is the CCI service.
type Driver struct {
	cci.UnimplementedCCIDriverServer
	mu      sync.Mutex
	topo    *Topology
	sysRoot string
	store   *Store
}

func refuse(format string, args ...any) *cci.AdmitResponse {
	return &cci.AdmitResponse{Err: fmt.Sprintf(format, args...)} // S1.6: no rSet or groups in a refusal
}

// CCIAdmit reserves CPUs for one (pod, container) (S1.4, S1.5, section 2).
func (d *Driver) CCIAdmit(ctx context.Context, req *cci.AdmitRequest) (*cci.AdmitResponse, error) {
	// Only the fields the driver keys on are checked; namespace and claim_name are labels (S1.3).
	for field, value := range map[string]string{"claim_uid": req.ClaimUid, "pod": req.Pod,
		"container": req.Container} {
		if value == "" {
			return refuse("AdmitRequest.%s is empty; fix: the node must send it (docs/spec.md S1.3)", field), nil
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	key := admissionKey(req.Pod, req.Container)
	if a, ok := d.store.byKey[key]; ok {
		if a.ClaimUID == req.ClaimUid && a.Handle == req.ResourceHandle {
			return reply(a), nil // a retry after a deadline: the same answer, nothing new granted (S1.5)
		}
		return refuse("pod %s container %s is already admitted with claim %s; fix: remove it before admitting "+
			"it with another claim or other parameters (S1.5)", req.Pod, req.Container, a.ClaimUID), nil
	}
	avail, err := ParseCPUList(req.AvailableCpus)
	if err != nil {
		return refuse("availableCpus: %v; fix: send a Linux cpulist such as 0-3,8 (S1.4)", err), nil
	}
	groups, err := ParseClaim(req.ResourceHandle, true)
	if err != nil {
		return refuse("%v", err), nil
	}
	if d.topo.Stale() { // CPU hotplug since the last read: place on the machine as it is now
		topo, err := ReadTopology(d.sysRoot)
		if err != nil {
			return refuse("reading the topology: %v", err), nil
		}
		d.topo = topo
	}
	// CPUs the driver withholds are never granted again, even when availableCpus holds them (S1.4).
	grants, err := d.topo.PlaceClaim(groups, avail.Minus(d.store.Withheld()))
	if err != nil {
		return refuse("%v", err), nil
	}
	a := &Admission{Pod: req.Pod, Container: req.Container, Namespace: req.Namespace, ClaimUID: req.ClaimUid,
		ClaimName: req.ClaimName, Handle: req.ResourceHandle}
	var withheld CPUSet
	for i, g := range grants {
		a.Groups = append(a.Groups, GroupGrant{CPUs: g.CPUs.String(), Exclusive: groups[i].Exclusive})
		withheld = withheld.Union(g.Withheld)
	}
	a.Withheld = withheld.String()
	if ctx.Err() != nil { // the node has given up: a grant it never sees would leak (S1.6)
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	next := d.store.Copy()
	next[key] = a
	if err := d.store.Commit(next); err != nil {
		return refuse("%v", err), nil
	}
	return reply(a), nil
}

func reply(a *Admission) *cci.AdmitResponse {
	var all CPUSet
	resp := &cci.AdmitResponse{RSet: &cci.ResourceSet{}}
	for _, g := range a.Groups {
		set, _ := ParseCPUList(g.CPUs)
		all = all.Union(set)
		resp.RSet.Exclusive = resp.RSet.Exclusive || g.Exclusive
		resp.Groups = append(resp.Groups, &cci.ResourceSet{Cpuset: g.CPUs, Exclusive: g.Exclusive})
	}
	resp.RSet.Cpuset = all.String()
	return resp
}

// CCIAddContainerResource binds an admission to its container id (S1.7).
func (d *Driver) CCIAddContainerResource(ctx context.Context, req *cci.AddResourceRequest) (*cci.AddResourceResponse, error) {
	if req.ContainerId == "" {
		return &cci.AddResourceResponse{Err: "AddResourceRequest.container_id is empty; fix: send the runtime's " +
			"container id (S1.7)"}, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	key := admissionKey(req.Pod, req.Container)
	a, ok := d.store.byKey[key]
	if !ok {
		return &cci.AddResourceResponse{Err: fmt.Sprintf("pod %s container %s was never admitted; fix: call "+
			"CCIAdmit first (S1.7)", req.Pod, req.Container)}, nil
	}
	if a.ContainerID == req.ContainerId {
		return &cci.AddResourceResponse{}, nil
	}
	for _, other := range d.store.byKey {
		if other != a && other.ContainerID == req.ContainerId {
			return &cci.AddResourceResponse{Err: fmt.Sprintf("container id %s already belongs to pod %s container "+
				"%s; fix: send the id of this container (S1.7)", req.ContainerId, other.Pod, other.Container)}, nil
		}
	}
	updated := *a
	updated.ContainerID = req.ContainerId // a restarted container gets a new id (S1.7)
	if ctx.Err() != nil {
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	next := d.store.Copy()
	next[key] = &updated
	if err := d.store.Commit(next); err != nil {
		return &cci.AddResourceResponse{Err: err.Error()}, nil
	}
	return &cci.AddResourceResponse{}, nil
}

// CCIRemoveContainerResource frees a container's CPUs and withheld siblings (S1.7).
func (d *Driver) CCIRemoveContainerResource(ctx context.Context, req *cci.RemoveResourceRequest) (*cci.RemoveResourceResponse, error) {
	// claim_uid is the key; an empty namespace or claim_name must not block a Remove (a refused Remove
	// leaves CPUs held until the node retries, S1.3).
	if req.ClaimUid == "" {
		return &cci.RemoveResourceResponse{Err: "RemoveResourceRequest.claim_uid is empty; fix: the node must " +
			"send the claim's uid (S1.7)"}, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	next := d.store.Copy()
	removed := 0
	for key, a := range d.store.byKey {
		switch {
		case req.ContainerId == "" && a.ContainerID == "" && a.ClaimUID == req.ClaimUid:
			// A pod that failed before its container started: drop the claim's never-added admissions.
			delete(next, key)
			removed++
		case req.ContainerId != "" && a.ContainerID == req.ContainerId:
			if a.ClaimUID != req.ClaimUid {
				return &cci.RemoveResourceResponse{Err: fmt.Sprintf("container %s holds claim %s, not %s; fix: "+
					"send the container's own claim (S1.7)", req.ContainerId, a.ClaimUID, req.ClaimUid)}, nil
			}
			delete(next, key)
			removed++
		}
	}
	if removed == 0 {
		return &cci.RemoveResourceResponse{}, nil // unknown or already removed: idempotent (S1.7)
	}
	if ctx.Err() != nil {
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if err := d.store.Commit(next); err != nil {
		return &cci.RemoveResourceResponse{Err: err.Error()}, nil
	}
	return &cci.RemoveResourceResponse{}, nil
}

// Registrar answers the kubelet plugin watcher (S1.2).
type Registrar struct {
	registration.UnimplementedRegistrationServer
	name, endpoint string
}

// GetInfo identifies the driver as a CCI plugin speaking v1alpha1.
func (r *Registrar) GetInfo(context.Context, *registration.InfoRequest) (*registration.PluginInfo, error) {
	return &registration.PluginInfo{Type: "CCIPlugin", Name: r.name, Endpoint: r.endpoint,
		SupportedVersions: []string{"v1alpha1"}}, nil
}

// NotifyRegistrationStatus logs the node's verdict and answers with an empty reply.
func (r *Registrar) NotifyRegistrationStatus(_ context.Context, st *registration.RegistrationStatus) (*registration.RegistrationStatusResponse, error) {
	if st.PluginRegistered {
		log.Printf("registered with the node")
	} else {
		log.Printf("the node refused the registration: %s", st.Error)
	}
	return &registration.RegistrationStatusResponse{}, nil
}
