package checkpoint_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/checkpoint"
)

func sample() []checkpoint.Claim {
	return []checkpoint.Claim{
		{UID: "b", Namespace: "ns", Name: "two", CPUs: "2-3", Pods: []string{"pod-b"},
			Devices: []checkpoint.Device{{Request: "cpus", Pool: "node", Device: "numa-0", ShareID: "s1"}}},
		{UID: "a", Namespace: "ns", Name: "one", CPUs: "0", Devices: []checkpoint.Device{{Request: "r", Pool: "node", Device: "cpu-0"}}},
	}
}

func TestRoundTrip(t *testing.T) {
	s := checkpoint.Store{Dir: filepath.Join(t.TempDir(), "state"), Driver: "d.example"}
	if got, err := s.Load(); err != nil || got != nil {
		t.Fatalf("first start: %v %v, want no claims and no error", got, err)
	}
	if err := s.Save(sample()); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	want := []checkpoint.Claim{sample()[1], sample()[0]} // sorted by UID
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loaded %+v, want %+v", got, want)
	}
	if err := s.Save(nil); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(); err != nil || len(got) != 0 {
		t.Errorf("after saving none: %v %v", got, err)
	}
	entries, _ := os.ReadDir(s.Dir)
	if len(entries) != 1 {
		t.Errorf("state dir holds %d files, want the checkpoint alone (no temporary left)", len(entries))
	}
}

func TestCorruptionIsRefusedNamingTheFile(t *testing.T) {
	s := checkpoint.Store{Dir: t.TempDir(), Driver: "d.example"}
	if err := s.Save(sample()); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(s.Path())
	cases := map[string]string{
		"truncated":       string(good[:len(good)/2]),
		"edited CPUs":     strings.Replace(string(good), `"2-3"`, `"2-4"`, 1),
		"other version":   strings.Replace(string(good), `"version": 1`, `"version": 2`, 1),
		"other driver":    strings.Replace(string(good), `"d.example"`, `"other.example"`, 1),
		"empty":           "",
		"checksum erased": strings.Replace(string(good), `"checksum": "`, `"checksum": "0`, 1),
	}
	for name, text := range cases {
		if err := os.WriteFile(s.Path(), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := s.Load()
		if !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), s.Path()) ||
			!strings.Contains(err.Error(), "delete the file") {
			t.Errorf("%s: error %v should be ErrCorrupt naming %s and the fix", name, err, s.Path())
		}
	}
}
