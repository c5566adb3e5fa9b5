package ccimanager

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

func TestRefusalsAreWordedAsTheEmbeddedNodeWordsThem(t *testing.T) {
	dir, err := os.MkdirTemp("", "cci")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	plugins := filepath.Join(dir, "plugins")
	sock := serve(t, dir, "drv", &fakeDriver{})
	plain := filepath.Join(plugins, "file")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	v := []string{SupportedVersion}
	cases := []struct {
		name, endpoint string
		versions       []string
		want           string
	}{
		{"drv", sock, v, ""},
		{"", sock, v, "invalid driver name ''"},
		{"a/b", sock, v, "invalid driver name 'a/b'"},
		{".x", sock, v, "invalid driver name '.x'"},
		{"drv", sock, []string{"v1", "v2"}, "none of the supported versions ['v1', 'v2'] is 'v1alpha1'"},
		{"drv", sock, nil, "none of the supported versions [] is 'v1alpha1'"},
		{"drv", "/elsewhere/d.sock", v, "endpoint '/elsewhere/d.sock' is not a socket under '" + plugins + "'"},
		{"drv", "rel.sock", v, "endpoint 'rel.sock' is not a socket under '" + plugins + "'"},
		{"drv", filepath.Join(plugins, "gone.sock"), v, "endpoint '" + filepath.Join(plugins, "gone.sock") + "' does not exist"},
		{"drv", plain, v, "endpoint '" + plain + "' is not a unix socket"},
	}
	reg := NewRegistry(plugins, 0)
	for _, tc := range cases {
		got := ValidateInfo(tc.name, tc.endpoint, tc.versions, plugins)
		if got != tc.want {
			t.Errorf("ValidateInfo(%q, %q, %v) = %q, want %q", tc.name, tc.endpoint, tc.versions, got, tc.want)
		}
		if err := reg.ValidatePlugin(tc.name, tc.endpoint, tc.versions); (err == nil) != (tc.want == "") {
			t.Errorf("ValidatePlugin(%q): %v", tc.name, err)
		}
	}
}

func TestPythonFormats(t *testing.T) {
	// expected values printed by CPython 3.11: repr(...) and json.dumps(json.loads(...), sort_keys=True)
	reprs := map[string]string{"abc": "'abc'", "it's": `"it's"`, `a'b"c`: `'a\'b"c'`, "t\tn\n": `'t\tn\n'`, `back\slash`: `'back\\slash'`}
	for in, want := range reprs {
		if got := pyRepr(in); got != want {
			t.Errorf("pyRepr(%q) = %s, want %s", in, got, want)
		}
	}
	got, err := pyJSON([]byte(`{"z":[1,2.50,1e16,123456789.0,0.00001,true,null],"a":{"y":"é\u0001","b":"x"}}`))
	want := `{"a": {"b": "x", "y": "\u00e9\u0001"}, "z": [1, 2.5, 1e+16, 123456789.0, 1e-05, true, null]}`
	if err != nil || got != want {
		t.Errorf("pyJSON = %s (%v), want %s", got, err, want)
	}
	if got := pyStatusCode(codeName("DeadlineExceeded")); got != "StatusCode.DEADLINE_EXCEEDED" {
		t.Errorf("pyStatusCode = %s", got)
	}
}

type codeName string

func (c codeName) String() string { return string(c) }

func TestTemplateClaimMapsToTheGeneratedClaimAndItsOpaqueParameters(t *testing.T) {
	generated := "pod-cpus-x7k2"
	pod := &v1.Pod{
		Spec:   v1.PodSpec{ResourceClaims: []v1.PodResourceClaim{{Name: "cpus", ResourceClaimTemplateName: ptr("tpl")}}},
		Status: v1.PodStatus{ResourceClaimStatuses: []v1.PodResourceClaimStatus{{Name: "cpus", ResourceClaimName: &generated}}},
	}
	pod.Namespace, pod.Name = "ns", "pod"
	container := &v1.Container{Name: "c", Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "cpus"}}}}
	params := json.RawMessage(`{"cores":["2"]}`)
	claim := &resourceapi.ResourceClaim{}
	claim.Name, claim.UID = generated, types.UID("uid-1")
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{{Request: "req", Driver: "cci.example.com", Pool: "node", Device: "cpus"}},
		Config: []resourceapi.DeviceAllocationConfiguration{
			{Source: resourceapi.AllocationConfigSourceClass, DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: "gpu.example.com", Parameters: runtime.RawExtension{Raw: []byte(`{}`)}}}},
			{Source: resourceapi.AllocationConfigSourceClaim, Requests: []string{"req"}, DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: "cci.example.com", Parameters: runtime.RawExtension{Raw: params}}}},
		},
	}}
	get := func(name string) (*resourceapi.ResourceClaim, error) {
		if name != generated {
			t.Fatalf("read claim %q, want the generated %q", name, generated)
		}
		return claim, nil
	}
	isCCI := func(d string) bool { return d == "cci.example.com" }
	got, ok, err := ContainerClaim(pod, container, get, isCCI)
	if err != nil || !ok {
		t.Fatalf("ContainerClaim: %v %v", ok, err)
	}
	if got.UID != "uid-1" || got.Name != generated || got.Driver != "cci.example.com" || string(got.Parameters) != string(params) {
		t.Errorf("claim = %+v", got)
	}
	if _, ok, err := ContainerClaim(pod, container, get, func(string) bool { return false }); ok || err != nil {
		t.Errorf("a claim of another driver is not the CCI manager's: %v %v", ok, err)
	}
	if _, ok, _ := ContainerClaim(pod, &v1.Container{Name: "plain"}, get, isCCI); ok {
		t.Error("a container without claims is not the CCI manager's")
	}
}

func ptr(s string) *string { return &s }

// The plugin manager deregisters and re-registers a live driver when its registration was superseded:
// admissions in between must still find the driver; a driver whose endpoint is gone goes at once.
func TestADeregistrationOfADriverThatStillAnswersWaitsForItsReregistration(t *testing.T) {
	var graces []func()
	saved := afterFunc
	afterFunc = func(_ time.Duration, f func()) { graces = append(graces, f) }
	defer func() { afterFunc = saved }()
	r := newRig(t, time.Second)
	sock := filepath.Join(r.dir, "plugins", "drv.sock")
	r.m.Registry.DeRegisterPlugin("drv", sock)
	first := r.m.Registry.Get("drv")
	if first == nil || len(graces) != 1 {
		t.Fatal("a driver whose endpoint answers must stay registered through a re-registration")
	}
	if err := r.m.Registry.RegisterPlugin("drv", sock, []string{SupportedVersion}, nil); err != nil {
		t.Fatal(err)
	}
	second := r.m.Registry.Get("drv")
	graces[0]() // the superseded registration's grace ends: it must not drop the new one
	if got := r.m.Registry.Get("drv"); got == nil || got != second || got == first {
		t.Fatalf("the re-registration must survive the grace of the superseded one: %v", got)
	}
	// no re-registration follows: the driver goes when the grace ends
	r.m.Registry.DeRegisterPlugin("drv", sock)
	if len(graces) != 2 || r.m.Registry.Get("drv") == nil {
		t.Fatal("a second deregistration of a live driver waits for its grace too")
	}
	graces[1]()
	if r.m.Registry.Get("drv") != nil {
		t.Error("without a re-registration the driver goes when its grace ends")
	}
}

func TestADeregistrationOfADriverWhoseEndpointIsGoneIsImmediate(t *testing.T) {
	r := newRig(t, time.Second)
	dead := filepath.Join(r.dir, "plugins", "dead.sock")
	if err := r.m.Registry.RegisterPlugin("dead", dead, []string{SupportedVersion}, nil); err != nil {
		t.Fatal(err)
	}
	r.m.Registry.DeRegisterPlugin("dead", dead)
	if r.m.Registry.Get("dead") != nil {
		t.Fatal("a driver whose endpoint does not answer is deregistered at once")
	}
	if !r.m.Registry.Known("dead") {
		t.Error("it stays known: its claims are refused with DriverNotRegistered")
	}
}
