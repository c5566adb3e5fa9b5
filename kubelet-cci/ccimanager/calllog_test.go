package ccimanager

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// With CCI_CALL_LOG set, every CCIAdmit, CCIAddContainerResource and whole admission is one line naming its
// pod and container: the kind backend times pods started side by side from it (docs/kind.md).
func TestCallLogNamesThePodOfEveryCall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cci_calls.jsonl")
	t.Setenv(CallLogEnv, path)
	r := newRig(t, time.Second)
	r.drv.addDelay = 20 * time.Millisecond
	ctx := context.Background()
	if _, err := r.m.Admit(ctx, request("p1", "c", `{"cpu attributes":[["EXCLUSIVE"]],"cores":["2"]}`)); err != nil {
		t.Fatal(err)
	}
	if err := r.m.ContainerCreated(ctx, "p1", "c", "cid-1", "/kubepods/pod-p1/cid-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.m.Admit(ctx, request("p2", "c", `{"cpu attributes":[["EXCLUSIVE"]],"cores":["99"]}`)); err == nil {
		t.Fatal("a claim of 99 CPUs was admitted")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var e CallEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not a JSON line: %q: %v", line, err)
		}
		got = append(got, e.Call+" "+e.Pod+"/"+e.Container)
		if e.Call == CallAdd && (e.Seconds < 0.020 || e.Outcome != "added") {
			t.Errorf("the 20 ms Add was recorded as %+v", e)
		}
	}
	want := []string{"CCIAdmit p1/c", "admission p1/c", "CCIAddContainerResource p1/c", "CCIAdmit p2/c", "admission p2/c"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("record %v, want %v", got, want)
	}
}

// Without the variable nothing is written and admission works as ever.
func TestCallLogIsOffByDefault(t *testing.T) {
	t.Setenv(CallLogEnv, "")
	r := newRig(t, time.Second)
	if r.m.calls != nil {
		t.Fatal("a call record was opened without CCI_CALL_LOG")
	}
	if _, err := r.m.Admit(context.Background(), request("p1", "c", `{"cpu attributes":[["EXCLUSIVE"]],"cores":["1"]}`)); err != nil {
		t.Fatal(err)
	}
}
