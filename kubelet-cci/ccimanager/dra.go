package ccimanager

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// Claims reach the kubelet the way KEP-3675's alpha specifies: as DRA resource.k8s.io/v1 ResourceClaims
// allocated by the real scheduler from the CCI driver's ResourceSlices, whose device config carries the
// claim parameters as opaque JSON for the driver. The mapping to the CCI protocol (docs/spec.md, "claims
// on the kind backend"):
//
//	AdmitRequest.claim_uid       = ResourceClaim.metadata.uid
//	AdmitRequest.claim_name      = ResourceClaim.metadata.name (for a template claim: the generated name)
//	AdmitRequest.namespace       = ResourceClaim.metadata.namespace (the pod's)
//	AdmitRequest.resource_handle = the opaque parameters of the config entry whose driver is the
//	                               allocated device's driver and which applies to the container's request
//	                               (Requests empty or naming it), re-encoded as the embedded node sends them.
//
// A container that references no claim of a CCI driver is not the CCI manager's: the static policy (or
// none) treats it exactly as an unpatched kubelet does.

// PodClaimName is the ResourceClaim object a pod's claim entry refers to: spec.resourceClaims[].
// resourceClaimName, or for a template the name in status.resourceClaimStatuses; "" when not generated yet.
func PodClaimName(pod *v1.Pod, entry string) string {
	for _, c := range pod.Spec.ResourceClaims {
		if c.Name != entry {
			continue
		}
		if c.ResourceClaimName != nil {
			return *c.ResourceClaimName
		}
		for _, s := range pod.Status.ResourceClaimStatuses {
			if s.Name == entry && s.ResourceClaimName != nil {
				return *s.ResourceClaimName
			}
		}
	}
	return ""
}

// ContainerClaim finds the CCI claim of a container. get fetches a ResourceClaim by name (the kubelet
// reads it from the API server under a deadline); isCCI says whether a driver name is a CCI driver (a
// registered one, or one the DeviceClass marks as CCI). ok is false when the container has no CCI claim.
// A container with more than one CCI claim is refused: the protocol grants one cpuset per container.
func ContainerClaim(pod *v1.Pod, container *v1.Container, get func(name string) (*resourceapi.ResourceClaim, error),
	isCCI func(driver string) bool) (Claim, bool, error) {
	var found []Claim
	for _, ref := range container.Resources.Claims {
		name := PodClaimName(pod, ref.Name)
		if name == "" {
			return Claim{}, false, fmt.Errorf("pod %s/%s: claim %s of container %s has no ResourceClaim yet",
				pod.Namespace, pod.Name, pyRepr(ref.Name), pyRepr(container.Name))
		}
		claim, err := get(name)
		if err != nil {
			return Claim{}, false, fmt.Errorf("pod %s/%s: reading ResourceClaim %s: %w", pod.Namespace, pod.Name, pyRepr(name), err)
		}
		if c, ok := cciClaimOf(claim, ref.Request, isCCI); ok {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 0:
		return Claim{}, false, nil
	case 1:
		return found[0], true, nil
	default:
		return Claim{}, false, fmt.Errorf("container %s references %d CCI claims; a container gets its CPUs from one "+
			"claim (KEP-3675: one cpuset per container): merge them into one claim with several core groups",
			pyRepr(container.Name), len(found))
	}
}

func cciClaimOf(claim *resourceapi.ResourceClaim, request string, isCCI func(string) bool) (Claim, bool) {
	alloc := claim.Status.Allocation
	if alloc == nil {
		return Claim{}, false
	}
	for _, result := range alloc.Devices.Results {
		if !isCCI(result.Driver) || (request != "" && result.Request != request) {
			continue
		}
		out := Claim{UID: string(claim.UID), Name: claim.Name, Driver: result.Driver}
		for _, cfg := range alloc.Devices.Config {
			if cfg.Opaque == nil || cfg.Opaque.Driver != result.Driver {
				continue
			}
			if len(cfg.Requests) == 0 || contains(cfg.Requests, result.Request) {
				out.Parameters = cfg.Opaque.Parameters.Raw // a later entry overrides an earlier one (DRA's order)
			}
		}
		return out, true
	}
	return Claim{}, false
}
