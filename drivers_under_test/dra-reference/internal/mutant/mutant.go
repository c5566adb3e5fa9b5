// Package mutant holds the one switch each deliberate fault of the driver is read from.
package mutant

import (
	"fmt"
	"sort"
	"strings"
)

// Name is one mutant: a build of the driver that breaks exactly one rule (issue 25 item 3).
type Name string

// The mutants, each read at one place in the driver. The comment names the rule it breaks.
const (
	None Name = ""
	// OverlappingGrants: under load (a claim prepared while another is held) the double-allocation
	// check and the free set ignore the other claims' CPUs, so grants overlap (grouped mode), and a
	// claimed container is also given a CPU of another held claim (individual mode, where the
	// scheduler's allocation alone never overlaps).
	OverlappingGrants Name = "overlapping-grants"
	// SharedKeepsGranted: the shared pool keeps the lowest CPU of every grant.
	SharedKeepsGranted Name = "shared-keeps-granted"
	// ForgetsOnRestart: the checkpoint is written but never read back on start.
	ForgetsOnRestart Name = "forgets-on-restart"
	// NoSyncOnConnect: on (re)connecting to the runtime, running containers are neither moved nor
	// remembered, so containers created while the driver was down keep every CPU, even after later
	// changes of the pool (the driver tracks only the containers it saw created).
	NoSyncOnConnect Name = "no-sync-on-connect"
	// ReleasesOnStop: a claimed container's stop returns its claim's CPUs to the shared pool while
	// the claim is still prepared (dra-driver-cpu #235 class).
	ReleasesOnStop Name = "releases-on-stop"
	// EmptyPoolEverything: the claim that empties the shared pool is prepared, and shared containers
	// then get every unreserved CPU (dra-driver-cpu #295 class).
	EmptyPoolEverything Name = "empty-pool-everything"
	// SplitsCores: devices are listed (individual) and CPUs picked (grouped) one thread per core first.
	SplitsCores Name = "splits-cores"
	// WrongNUMAAttribute: every device publishes its NUMA node plus one.
	WrongNUMAAttribute Name = "wrong-numa-attribute"
	// SlowPrepare: every NodePrepareResources call takes SlowPrepareDelay longer.
	SlowPrepare Name = "slow-prepare"
	// SecondPodAllowed: a claim already used by one pod is given to a second pod's containers too.
	SecondPodAllowed Name = "second-pod-allowed"
	// IgnoresKubeletPins: the kubelet's CPU manager checkpoint is never read, so a claim may be prepared
	// on CPUs its static policy pinned to a Guaranteed pod, the shared pool includes them, and the
	// pinned containers are moved like any other (the driver before it read cpu_manager_state).
	IgnoresKubeletPins Name = "ignores-kubelet-pins"
	// ShortClaim: a container consuming a claim of more than one CPU is pinned to all of them but the
	// highest; that CPU stays granted (out of the shared pool) and idle.
	ShortClaim Name = "short-claim"
	// FirstContainerOnly: a claim's CPUs go to the first container of its pod that consumes it; the
	// pod's other containers naming the claim run in the shared pool.
	FirstContainerOnly Name = "first-container-only"
	// ResetsOnKubeletRestart: when the kubelet registers the driver again (its restart), the driver drops
	// every grant as if nothing were prepared, moving claimed containers into the shared pool.
	ResetsOnKubeletRestart Name = "resets-on-kubelet-restart"
	// StaleUnprepares: after the kubelet registers the driver again, unprepare calls are taken for replays
	// of ones already done and acknowledged without releasing anything, until the next prepare.
	StaleUnprepares Name = "stale-unprepares"
	// IgnoresOpaqueConfig: a claim's opaque parameters are never read, so any configuration is prepared.
	IgnoresOpaqueConfig Name = "ignores-opaque-config"
)

var all = []Name{OverlappingGrants, SharedKeepsGranted, ForgetsOnRestart, NoSyncOnConnect, ReleasesOnStop,
	EmptyPoolEverything, SplitsCores, WrongNUMAAttribute, SlowPrepare, SecondPodAllowed, IgnoresKubeletPins,
	ShortClaim, FirstContainerOnly, ResetsOnKubeletRestart, StaleUnprepares, IgnoresOpaqueConfig}

// All returns every mutant's name, sorted.
func All() []string {
	out := make([]string, 0, len(all))
	for _, n := range all {
		out = append(out, string(n))
	}
	sort.Strings(out)
	return out
}

// Parse checks a --mutant value; the empty string is the correct driver.
func Parse(value string) (Name, error) {
	if value == "" {
		return None, nil
	}
	for _, n := range all {
		if string(n) == value {
			return n, nil
		}
	}
	return None, fmt.Errorf("--mutant=%q is not a mutant; use one of %s", value, strings.Join(All(), ", "))
}
