package ccimanager

import (
	"fmt"

	cciv1alpha1 "github.com/cci-conformance/cci-conformance/api/cci/v1alpha1"
	"k8s.io/utils/cpuset"
)

// Rejection reasons, the same machine-readable words the embedded node puts in AdmissionResult.reason
// (docs/spec.md §3.4); the kubelet reports them as the pod's admission failure reason.
const (
	ReasonDriverNotRegistered = "DriverNotRegistered"
	ReasonDriverTimeout       = "DriverTimeout"
	ReasonDriverUnavailable   = "DriverUnavailable"
	ReasonCCIAdmitError       = "CCIAdmitError"
	ReasonInvalidReply        = "InvalidDriverReply"
	ReasonAddError            = "CCIAddContainerResourceError"
)

// Rejection is an admission refused with a reason; DriverMayHold says the driver may believe it granted
// CPUs, so the kubelet owes it a CCIRemoveContainerResource (KEP-3675 "Remove" flow).
type Rejection struct {
	Reason        string
	Message       string
	DriverMayHold bool
}

func (r *Rejection) Error() string { return r.Reason + ": " + r.Message }

func reject(reason string, mayHold bool, format string, args ...any) *Rejection {
	return &Rejection{Reason: reason, Message: fmt.Sprintf(format, args...), DriverMayHold: mayHold}
}

// Group is one core group of a grant.
type Group struct {
	CPUs      cpuset.CPUSet
	Exclusive bool
}

// Grant is a validated CCIAdmit reply. Held = Exclusive ∪ Withheld leaves the shared pool; Shared
// (the SHARED groups) stays in it (KEP-3675: "the CPUs not assigned exclusively form the shared pool").
type Grant struct {
	Groups    []Group
	Exclusive cpuset.CPUSet
	Shared    cpuset.CPUSet
	Withheld  cpuset.CPUSet
}

// Held is what the container takes away from everyone else.
func (g Grant) Held() cpuset.CPUSet { return g.Exclusive.Union(g.Withheld) }

// Topology is the little the validation needs of the machine: the logical CPUs of each CPU's core.
type Topology struct {
	CoreOf map[int]cpuset.CPUSet
}

func (t Topology) core(cpu int) cpuset.CPUSet {
	if c, ok := t.CoreOf[cpu]; ok {
		return c
	}
	return cpuset.New(cpu)
}

func parseCPUs(text, what string) (cpuset.CPUSet, *Rejection) {
	set, err := cpuset.Parse(text)
	if err != nil {
		return cpuset.CPUSet{}, reject(ReasonInvalidReply, true, "%s is not a cpulist: %v", what, err)
	}
	return set, nil
}

// Validate checks a CCIAdmit reply against availableCpus and the claim, as the embedded node does
// (cci.py validate; docs/spec.md §3.4): err → CCIAdmitError; a cpuset that is empty, not a cpulist,
// overlapping between groups, not the union of the groups, outside availableCpus, of the wrong group
// count, or that leaves a CORE-SIBLING-DENIED core's siblings held by others → InvalidDriverReply.
// available ⊆ online ∖ reserved, so "within available" also proves "online".
func Validate(resp *cciv1alpha1.AdmitResponse, available cpuset.CPUSet, claim *ClaimShape, topo Topology) (Grant, *Rejection) {
	if resp.GetErr() != "" {
		return Grant{}, reject(ReasonCCIAdmitError, false, "%s", resp.GetErr())
	}
	if resp.GetRSet() == nil {
		return Grant{}, reject(ReasonInvalidReply, true, "reply has neither err nor rSet")
	}
	rset, rej := parseCPUs(resp.GetRSet().GetCpuset(), "rSet.cpuset")
	if rej != nil {
		return Grant{}, rej
	}
	if rset.IsEmpty() {
		return Grant{}, reject(ReasonInvalidReply, true, "rSet.cpuset is empty")
	}
	var groups []Group
	if len(resp.GetGroups()) > 0 {
		for i, g := range resp.GetGroups() {
			cpus, rej := parseCPUs(g.GetCpuset(), fmt.Sprintf("groups[%d].cpuset", i))
			if rej != nil {
				return Grant{}, rej
			}
			groups = append(groups, Group{CPUs: cpus, Exclusive: g.GetExclusive()})
		}
	} else { // a driver that omits groups is read as one group (DESIGN §2.1)
		groups = []Group{{CPUs: rset, Exclusive: resp.GetRSet().GetExclusive()}}
	}
	union := cpuset.New()
	for i, g := range groups {
		if g.CPUs.IsEmpty() {
			return Grant{}, reject(ReasonInvalidReply, true, "groups[%d] is empty", i)
		}
		if overlap := union.Intersection(g.CPUs); !overlap.IsEmpty() {
			return Grant{}, reject(ReasonInvalidReply, true, "groups overlap on %s", overlap.String())
		}
		union = union.Union(g.CPUs)
	}
	if !union.Equals(rset) {
		return Grant{}, reject(ReasonInvalidReply, true, "union of groups %s != rSet.cpuset %s",
			pyRepr(union.String()), pyRepr(rset.String()))
	}
	if !rset.IsSubsetOf(available) {
		return Grant{}, reject(ReasonInvalidReply, true, "cpuset %s is not within availableCpus: %s are reserved or held by others",
			pyRepr(rset.String()), pyRepr(rset.Difference(available).String()))
	}
	if claim != nil && len(resp.GetGroups()) > 0 && len(groups) != len(claim.Groups) {
		return Grant{}, reject(ReasonInvalidReply, true, "%d groups returned for a claim of %d", len(groups), len(claim.Groups))
	}
	grant := Grant{Groups: groups, Exclusive: cpuset.New(), Shared: cpuset.New(), Withheld: cpuset.New()}
	free := available.Difference(rset)
	for i, g := range groups {
		if !g.Exclusive {
			grant.Shared = grant.Shared.Union(g.CPUs)
			continue
		}
		grant.Exclusive = grant.Exclusive.Union(g.CPUs)
		if claim == nil || !deniesSiblings(claim, i, len(groups)) {
			continue
		}
		idle := cpuset.New()
		for _, cpu := range g.CPUs.UnsortedList() {
			idle = idle.Union(topo.core(cpu))
		}
		idle = idle.Difference(g.CPUs)
		if !idle.IsSubsetOf(free) {
			return Grant{}, reject(ReasonInvalidReply, true, "CORE-SIBLING-DENIED group %d uses cores whose siblings %s are not free",
				i, pyRepr(idle.Difference(free).String()))
		}
		grant.Withheld = grant.Withheld.Union(idle)
	}
	return grant, nil
}

func deniesSiblings(claim *ClaimShape, index, returned int) bool {
	if returned == len(claim.Groups) {
		return claim.Groups[index].Siblings == "denied"
	}
	// one group returned for a claim of several: withhold only when every exclusive group denies siblings
	exclusive := 0
	for _, g := range claim.Groups {
		if g.Exclusive {
			exclusive++
			if g.Siblings != "denied" {
				return false
			}
		}
	}
	return exclusive > 0
}
