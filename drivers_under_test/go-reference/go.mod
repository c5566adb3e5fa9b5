module github.com/cci-conformance/cci-conformance/drivers_under_test/go-reference

go 1.25.0

require (
	github.com/cci-conformance/cci-conformance/api v0.0.0
	google.golang.org/grpc v1.72.1
	k8s.io/kubelet v0.34.12
)

require (
	golang.org/x/net v0.56.0 // indirect
	golang.org/x/sys v0.46.0 // indirect
	golang.org/x/text v0.39.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20250303144028-a0af3efb3deb // indirect
	google.golang.org/protobuf v1.36.12-0.20260120151049-f2248ac996af // indirect
)

// The API stubs live in this repository (issue 13): build against the checked-in copy.
replace github.com/cci-conformance/cci-conformance/api => ../../api
