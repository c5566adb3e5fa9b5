package kubeletstate_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/fixture"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/kubeletstate"
)

// A file as a static-policy kubelet writes it; its checksum is not the kubelet's and is ignored (see
// the file type's comment: it hashes a Go rendering of kubelet internals, and the kubelet's rename
// makes torn reads impossible).
const static = `{"policyName":"static","defaultCpuSet":"0,3-4,7","entries":{"pod-1":{"c0":"1,5"},` +
	`"pod-2":{"app":"2","side":"6"}},"checksum":42}`

func TestParseStaticPins(t *testing.T) {
	s, err := kubeletstate.Parse([]byte(static))
	if err != nil {
		t.Fatal(err)
	}
	if s.Policy != "static" || s.Default.String() != "0,3-4,7" || s.All().String() != "1-2,5-6" || len(s.Pinned) != 3 {
		t.Fatalf("state %+v", s)
	}
	if !s.Has("pod-1", "c0") || !s.Has("pod-2", "side") || s.Has("pod-1", "app") || s.Has("pod-3", "c0") {
		t.Errorf("Has: %+v", s.Pinned)
	}
	if got := s.Owners(s.All().Difference(s.Pinned[kubeletstate.Key{PodUID: "pod-2", Container: "app"}])); got !=
		"pod pod-1 container c0 (CPUs 1,5), pod pod-2 container side (CPUs 6)" {
		t.Errorf("owners %q", got)
	}
}

func TestNoEntriesIsNothingPinned(t *testing.T) {
	for name, doc := range map[string]string{
		// the kubelet omits entries when nothing is pinned; policy none never pins
		"static, nothing pinned": `{"policyName":"static","defaultCpuSet":"0-7","checksum":14413152}`,
		"policy none":            `{"policyName":"none","defaultCpuSet":"","checksum":1353318690}`,
		"empty entries":          `{"policyName":"static","defaultCpuSet":"0-7","entries":{},"checksum":1}`,
	} {
		s, err := kubeletstate.Parse([]byte(doc))
		if err != nil || !s.All().IsEmpty() || len(s.Pinned) != 0 {
			t.Errorf("%s: %+v %v", name, s, err)
		}
	}
}

func TestGarbageIsAnError(t *testing.T) {
	for name, doc := range map[string]string{
		"empty":             "",
		"truncated":         `{"policyName":"static","defaultCpuSet":"0-7","entr`,
		"not an object":     `[1,2]`,
		"no policy":         `{"defaultCpuSet":"0-7"}`,
		"bad cpulist":       `{"policyName":"static","defaultCpuSet":"0-7","entries":{"p":{"c":"3-x"}}}`,
		"bad default":       `{"policyName":"static","defaultCpuSet":"seven"}`,
		"v1 entries":        `{"policyName":"static","defaultCpuSet":"0-7","entries":{"0123abcd":"1-2"}}`,
		"two objects":       `{"policyName":"none","defaultCpuSet":""}{"policyName":"none"}`,
		"entries not a map": `{"policyName":"static","defaultCpuSet":"0-7","entries":"1-2"}`,
	} {
		if s, err := kubeletstate.Parse([]byte(doc)); err == nil {
			t.Errorf("%s: parsed as %+v", name, s)
		}
	}
}

func TestMissingFileIsNothingPinned(t *testing.T) {
	f := &kubeletstate.File{Path: filepath.Join(t.TempDir(), "cpu_manager_state")}
	s, err := f.Read()
	if err != nil || !s.All().IsEmpty() || s.Policy != "" {
		t.Errorf("missing file: %+v %v", s, err)
	}
}

// An unparseable file is an error naming the file, and the pins stay the last good ones: it never
// reads as "nothing pinned". Once the file parses again it is current again.
func TestUnreadableFileKeepsTheLastGoodPins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu_manager_state")
	f := &kubeletstate.File{Path: path}
	fixture.WriteRaw(t, path, []byte(static))
	if s, err := f.Read(); err != nil || s.All().String() != "1-2,5-6" {
		t.Fatalf("good file: %+v %v", s, err)
	}
	fixture.WriteRaw(t, path, []byte(`{"policyName":"static","entr`))
	s, err := f.Read()
	if err == nil || !strings.Contains(err.Error(), path) || s.All().String() != "1-2,5-6" {
		t.Fatalf("garbage: pins %s, error %v; want the last good pins and an error naming %s", s.All(), err, path)
	}
	if _, err := f.Read(); err == nil {
		t.Error("the second read of the same garbage passed")
	}
	fixture.WriteCPUManagerState(t, path, "static", "0-1,3-7", map[string]map[string]string{"pod-9": {"c0": "2"}})
	if s, err := f.Read(); err != nil || s.All().String() != "2" {
		t.Errorf("after the kubelet rewrote it: %+v %v", s, err)
	}
}

func TestSamePins(t *testing.T) {
	a, _ := kubeletstate.Parse([]byte(static))
	b, _ := kubeletstate.Parse([]byte(strings.Replace(static, `"0,3-4,7"`, `"0,3-4"`, 1)))
	c, _ := kubeletstate.Parse([]byte(strings.Replace(static, `"side":"6"`, `"side":"7"`, 1)))
	if !a.SamePins(b) || a.SamePins(c) || a.SamePins(kubeletstate.State{}) || !(kubeletstate.State{}).SamePins(kubeletstate.State{}) {
		t.Error("SamePins compares the pins only")
	}
}
