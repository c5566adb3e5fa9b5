package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/mutant"
)

// The harness's DaemonSet passes dra-driver-cpu style flags; the same argv must configure this driver.
func TestDeploymentFlags(t *testing.T) {
	t.Setenv("HOST_ROOT", "/host")
	c, err := parseFlags([]string{"--v=4", "--cpu-device-mode=grouped", "--bind-address=:8081", "--hostname-override=w1",
		"--group-by=numanode", "--reserved-cpus=0-1"})
	if err != nil {
		t.Fatal(err)
	}
	if c.mode != "grouped" || c.nodeName != "w1" || c.reserved != "0-1" || c.hostRoot != "/host" || c.bind != ":8081" ||
		c.stateDir != "/var/lib/kubelet/plugins/"+DefaultDriverName || c.kubeletState != "/host/var/lib/kubelet/cpu_manager_state" {
		t.Errorf("config %+v", c)
	}
}

// The kubelet's checkpoint is found below the host root as sysfs is; an explicit empty value ignores it.
func TestKubeletCPUStateFlag(t *testing.T) {
	t.Setenv("HOST_ROOT", "")
	for args, want := range map[string]string{
		"":                                       "/var/lib/kubelet/cpu_manager_state",
		"--host-root=/node":                      "/node/var/lib/kubelet/cpu_manager_state",
		"--kubelet-cpu-state=":                   "",
		"--kubelet-cpu-state=/x/state":           "/x/state",
		"--host-root=/node --kubelet-cpu-state=": "",
	} {
		c, err := parseFlags(strings.Fields(args))
		if err != nil || c.kubeletState != want {
			t.Errorf("%q: kubelet state %q (%v), want %q", args, c.kubeletState, err, want)
		}
	}
}

func TestRepeatedProgramNameIsAnError(t *testing.T) {
	// As `args` after the entrypoint the program name comes first and Go's flag parsing would stop there.
	if _, err := parseFlags([]string{"/dra-reference", "--cpu-device-mode=grouped"}); err == nil ||
		!strings.Contains(err.Error(), "program name") {
		t.Errorf("error %v", err)
	}
	if _, err := parseFlags([]string{"--group-by=socket"}); err == nil {
		t.Error("--group-by=socket accepted")
	}
}

func TestMutantNames(t *testing.T) {
	// the ten of issue 25, ignores-kubelet-pins, and one for each requirement no mutant broke before (CLAIM-601,
	// CLAIM-605, RESTART-601, RESTART-602, ROBUST-601)
	if len(mutant.All()) != 16 {
		t.Errorf("%d mutants, want 16", len(mutant.All()))
	}
	for _, name := range mutant.All() {
		if m, err := mutant.Parse(name); err != nil || string(m) != name {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := mutant.Parse("nope"); err == nil || !strings.Contains(err.Error(), "slow-prepare") {
		t.Errorf("unknown mutant: %v", err)
	}
}

func TestWatchRegistrationsSignalsEachRegistrationAfterTheFirst(t *testing.T) {
	type status struct{ n int }
	var mu sync.Mutex
	var current *status
	set := func(s *status) { mu.Lock(); current = s; mu.Unlock() }
	again := make(chan struct{}, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go watchRegistrations(ctx, func() (any, bool) {
		mu.Lock()
		defer mu.Unlock()
		return current, current != nil
	}, func() { again <- struct{}{} })
	expect := func(want bool, what string) {
		t.Helper()
		select {
		case <-again:
			if !want {
				t.Fatalf("%s: signalled", what)
			}
		case <-time.After(10 * registrationPoll):
			if want {
				t.Fatalf("%s: not signalled", what)
			}
		}
	}
	expect(false, "no registration yet")
	set(&status{1})
	expect(false, "the first registration")
	set(&status{2})
	expect(true, "a second registration (a kubelet restart)")
	expect(false, "no new registration")
}
