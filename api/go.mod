module github.com/cci-conformance/cci-conformance/api

// Kept at the versions Kubernetes v1.34 builds with, so a kubelet patch or a driver can use this module
// without moving its grpc/protobuf (api/generate.sh says where the pins come from).
go 1.24.0

require (
	google.golang.org/grpc v1.72.1
	google.golang.org/protobuf v1.36.11
)

require (
	golang.org/x/net v0.35.0 // indirect
	golang.org/x/sys v0.30.0 // indirect
	golang.org/x/text v0.22.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20250218202821-56aae31c358a // indirect
)
