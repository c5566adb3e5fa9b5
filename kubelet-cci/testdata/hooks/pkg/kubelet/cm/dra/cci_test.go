/*
Added by cci-conformance (kubelet-cci/testdata/hooks): tests of patch 0002 (dra/cci.go and its hunk in
claiminfo.go). Run by `cci-conformance kind test-kubelet-hooks` inside the patched tree.
*/

package dra

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func cciTwoDriverClaim() *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "uid"},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{
				{Request: "cpus", Driver: "cci.example.com", Pool: "w", Device: "slot-0"},
				{Request: "gpu", Driver: "gpu.example.com", Pool: "w", Device: "gpu-0"},
			},
		}}},
	}
}

// KEP-3675's alpha takes CCI claims through DRA: the allocation results of a CCI driver get no DRA driver state,
// so the DRA manager never looks for a DRA plugin of that name nor calls NodePrepareResources for it.
func TestCCIDriversClaimsGetNoDRADriverState(t *testing.T) {
	t.Cleanup(func() { cciDrivers.Store(nil) })
	info, err := newClaimInfoFromClaim(cciTwoDriverClaim())
	if err != nil {
		t.Fatal(err)
	}
	if len(info.DriverState) != 2 {
		t.Fatalf("without a CCI filter every driver is DRA's: %v", info.DriverState)
	}
	SetCCIDriverFilter(func(driver string) bool { return driver == "cci.example.com" })
	info, err = newClaimInfoFromClaim(cciTwoDriverClaim())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := info.DriverState["cci.example.com"]; ok {
		t.Error("the CCI driver's result got DRA driver state")
	}
	if _, ok := info.DriverState["gpu.example.com"]; !ok || len(info.DriverState) != 1 {
		t.Errorf("the other driver's result must stay DRA's: %v", info.DriverState)
	}
}
