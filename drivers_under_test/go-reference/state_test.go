package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStoreSurvivesReopenAndRefusesCorruption(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	next := s.Copy()
	next[admissionKey("p", "c")] = &Admission{Pod: "p", Container: "c", ClaimUID: "u", ClaimName: "n",
		Groups: []GroupGrant{{CPUs: "1-2", Exclusive: true}}, Withheld: "9"}
	if err := s.Commit(next); err != nil {
		t.Fatal(err)
	}
	again, err := OpenStore(dir)
	if err != nil || again.Withheld().String() != "1-2,9" {
		t.Fatalf("reopened: %v %v", again, err)
	}
	// Remove it again; then a torn last line (kill during a write) is dropped, not fatal.
	next = again.Copy()
	delete(next, admissionKey("p", "c"))
	if err := again.Commit(next); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, stateName)
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(path, append(data, []byte(`0badc0de {"set":[{"pod"`)...), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := OpenStore(dir); err != nil || len(s.byKey) != 0 {
		t.Fatalf("torn tail: %v %v", s, err)
	}
	// A whole line with a wrong CRC cannot come from a kill: refuse to start.
	data, _ = os.ReadFile(path)
	data[0] ^= 1
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStore(dir); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("corrupt state accepted: %v", err)
	}
}

// BenchmarkCommit is the cost of one durable state change with 60 live admissions.
func BenchmarkCommit(b *testing.B) {
	s, err := OpenStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	next := s.Copy()
	for i := 0; i < 60; i++ {
		next[admissionKey(fmt.Sprint(i), "c")] = &Admission{Pod: fmt.Sprint(i), Container: "c", ClaimUID: "u",
			Groups: []GroupGrant{{CPUs: "1-2", Exclusive: true}}}
	}
	for i := 0; i < b.N; i++ {
		if err := s.Commit(next); err != nil {
			b.Fatal(err)
		}
	}
}
