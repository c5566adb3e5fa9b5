// Package api is the root of the Go stubs of the cci-conformance protocol; the CCI driver API lives in
// cci/v1alpha1 (generated from cci_conformance/protocol/protos/cci_v1alpha1.proto by generate.sh). The
// kubelet's registration and pod-resources APIs are not copied here: use k8s.io/kubelet/pkg/apis/...
package api
