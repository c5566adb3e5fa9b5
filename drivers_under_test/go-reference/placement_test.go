package main

import (
	"strings"
	"testing"
)

func place(t *testing.T, topo *Topology, handle string, free CPUSet) ([]Grant, error) {
	t.Helper()
	groups, err := ParseClaim(handle, true)
	if err != nil {
		t.Fatalf("%s: %v", handle, err)
	}
	return topo.PlaceClaim(groups, free)
}

func mustPlace(t *testing.T, topo *Topology, handle string, free CPUSet) []Grant {
	t.Helper()
	grants, err := place(t, topo, handle, free)
	if err != nil {
		t.Fatalf("%s: %v", handle, err)
	}
	for _, g := range grants {
		if !g.CPUs.Union(g.Withheld).SubsetOf(free) {
			t.Fatalf("%s: %s + withheld %s outside free %s", handle, g.CPUs, g.Withheld, free)
		}
	}
	return grants
}

func nodesOf(topo *Topology, s CPUSet) map[int]bool {
	out := map[int]bool{}
	for _, c := range s.List() {
		out[topo.Cores[topo.CoreOf[c]].Node] = true
	}
	return out
}

// splitCores counts cores the set touches without holding all their threads (S2.4).
func splitCores(topo *Topology, s CPUSet) int {
	n := 0
	for _, c := range topo.Cores {
		if k := c.Threads.Intersect(s).Len(); k > 0 && k < c.Threads.Len() {
			n++
		}
	}
	return n
}

func TestSiblingsRequiredTakesWholeCores(t *testing.T) {
	topo := smt2(t)
	g := mustPlace(t, topo, `{"cores": ["4"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-REQUIRED"]]}`, topo.Online)[0]
	if g.CPUs.Len() != 4 || splitCores(topo, g.CPUs) != 0 {
		t.Fatalf("got %s", g.CPUs)
	}
	// Only split cores free: no whole core, so REQUIRED cannot be met.
	if _, err := place(t, topo, `{"cores": ["2"], "cpu attributes": [["CORE-SIBLING-REQUIRED"]]}`, NewCPUSet(0, 1, 2, 3)); err == nil {
		t.Fatal("REQUIRED placed on threads of split cores")
	}
	if _, err := place(t, topo, `{"cores": ["3"], "cpu attributes": [["CORE-SIBLING-REQUIRED"]]}`, topo.Online); err == nil ||
		!strings.Contains(err.Error(), "multiple of 2") {
		t.Fatalf("odd REQUIRED count: %v", err)
	}
}

func TestSiblingsDeniedWithholdsTheOtherThreads(t *testing.T) {
	topo := smt2(t)
	g := mustPlace(t, topo, `{"cores": ["3"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-DENIED"]]}`, topo.Online)[0]
	if g.CPUs.Len() != 3 || g.Withheld.Len() != 3 || splitCores(topo, g.CPUs) != 3 {
		t.Fatalf("got %s withheld %s", g.CPUs, g.Withheld)
	}
	for _, c := range g.CPUs.List() {
		if !topo.Cores[topo.CoreOf[c]].Threads.SubsetOf(g.CPUs.Union(g.Withheld)) {
			t.Fatalf("sibling of %d neither granted nor withheld", c)
		}
	}
	// A core whose sibling is not available cannot be used.
	free := NewCPUSet(0, 1, 9) // core 1 whole (1, 9); core 0 has only thread 0
	g = mustPlace(t, topo, `{"cores": ["1"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-DENIED"]]}`, free)[0]
	if g.CPUs.String() != "1" || g.Withheld.String() != "9" {
		t.Fatalf("got %s withheld %s", g.CPUs, g.Withheld)
	}
}

func TestPreferredSplitsAtMostOneCore(t *testing.T) {
	topo := smt2(t)
	free := topo.Online.Minus(NewCPUSet(8)) // core 0 half used
	g := mustPlace(t, topo, `{"cores": ["5"], "mem attributes": ["NUMA-MEM-AFFINITY-BIND-REQUIRED"]}`, free)[0]
	if g.CPUs.Len() != 5 || splitCores(topo, g.CPUs) > 1 || len(nodesOf(topo, g.CPUs)) != 1 {
		t.Fatalf("got %s", g.CPUs)
	}
}

func TestNUMARules(t *testing.T) {
	topo := smt2(t)
	g := mustPlace(t, topo, `{"cores": ["8"], "mem attributes": ["NUMA-MEM-AFFINITY-BIND-REQUIRED"]}`, topo.Online)[0]
	if len(nodesOf(topo, g.CPUs)) != 1 {
		t.Fatalf("bind: %s", g.CPUs)
	}
	if _, err := place(t, topo, `{"cores": ["9"], "mem attributes": ["NUMA-MEM-AFFINITY-BIND-REQUIRED"]}`, topo.Online); err == nil {
		t.Fatal("bind of 9 CPUs on 8-CPU nodes placed")
	}
	g = mustPlace(t, topo, `{"cores": ["9"], "mem attributes": ["NUMA-MEM-AFFINITY-BIND-PREFERRED"]}`, topo.Online)[0]
	if g.CPUs.Len() != 9 {
		t.Fatalf("bind preferred fallback: %s", g.CPUs)
	}
	g = mustPlace(t, topo, `{"cores": ["2"], "mem attributes": ["NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED"]}`, topo.Online)[0]
	if len(nodesOf(topo, g.CPUs)) != 2 {
		t.Fatalf("interleave: %s", g.CPUs)
	}
	if _, err := place(t, topo, `{"cores": ["1"], "mem attributes": ["NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED"]}`, topo.Online); err == nil {
		t.Fatal("interleave of 1 CPU over 2 nodes placed")
	}
	dev := `{"cores": ["3"], "device attributes": [{"affinity": "NUMA-DEVICE-AFFINITY-%s", "device": "0000:3b:00.0"}]}`
	g = mustPlace(t, topo, strings.Replace(dev, "%s", "REQUIRED", 1), topo.Online)[0]
	if nodes := nodesOf(topo, g.CPUs); len(nodes) != 1 || !nodes[1] {
		t.Fatalf("device required: %s", g.CPUs)
	}
	// Node 1 has 1 free CPU: the preferred device node cannot hold 3, the required one refuses.
	free := topo.NodeCPUs[0].Union(NewCPUSet(4))
	if _, err := place(t, topo, strings.Replace(dev, "%s", "REQUIRED", 1), free); err == nil {
		t.Fatal("device required placed off the device's node")
	}
	g = mustPlace(t, topo, strings.Replace(dev, "%s", "PREFERRED", 1), free)[0]
	if g.CPUs.Len() != 3 {
		t.Fatalf("device preferred fallback: %s", g.CPUs)
	}
}

func TestGroupsAreDisjointAndRangesTakeTheMost(t *testing.T) {
	topo := smt2(t)
	grants := mustPlace(t, topo, `{"cores": ["4", "3", "2-20"], "cpu attributes": ["EXCLUSIVE", "SHARED", "SHARED"]}`, topo.Online)
	if grants[0].CPUs.Len() != 4 || grants[1].CPUs.Len() != 3 || grants[2].CPUs.Len() != 9 {
		t.Fatalf("counts %d %d %d", grants[0].CPUs.Len(), grants[1].CPUs.Len(), grants[2].CPUs.Len())
	}
	all := grants[0].CPUs.Union(grants[1].CPUs).Union(grants[2].CPUs)
	if all.Len() != 16 {
		t.Fatalf("groups overlap: %v", grants)
	}
	if _, err := place(t, topo, `{"cores": ["17"]}`, topo.Online); err == nil {
		t.Fatal("17 CPUs placed on 16")
	}
}

// BenchmarkPlaceOn1024CPUs is one admission's placement on a scale-8s-1024-like machine (16 nodes x 32
// cores x 2 threads) with a quarter of the CPUs taken: the work must stay per node, not per machine.
func BenchmarkPlaceOn1024CPUs(b *testing.B) {
	var m fakeMachine
	for n := 0; n < 16; n++ {
		var cores [][]int
		for c := 0; c < 32; c++ {
			first := n*32 + c
			cores = append(cores, []int{first, first + 512})
		}
		m.nodes = append(m.nodes, cores)
	}
	topo, err := ReadTopology(m.render(b))
	if err != nil {
		b.Fatal(err)
	}
	var free CPUSet
	for cpu := 0; cpu < 1024; cpu++ {
		if cpu%4 != 0 {
			free.Add(cpu)
		}
	}
	groups, err := ParseClaim(`{"cores": ["2"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-PREFERRED"]],
		"mem attributes": ["NUMA-MEM-AFFINITY-BIND-PREFERRED"]}`, true)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := topo.PlaceClaim(groups, free); err != nil {
			b.Fatal(err)
		}
	}
}

// A core whose sibling is offline is a whole core of one CPU: CORE-SIBLING-REQUIRED with interleave can
// take one such core per node (found on sparse-offline by the stateful suite).
func TestInterleaveWholeCoresUsesOneThreadCores(t *testing.T) {
	m := fakeMachine{nodes: [][][]int{{{0, 4}, {1}}, {{2, 6}, {3}}}} // CPUs 5 and 7 offline
	topo, err := ReadTopology(m.render(t))
	if err != nil {
		t.Fatal(err)
	}
	claim := `{"cores": ["2"], "cpu attributes": [["CORE-SIBLING-REQUIRED"]], "mem attributes": ["NUMA-MEM-AFFINITY-INTERLEAVE-%s"]}`
	for _, strength := range []string{"REQUIRED", "PREFERRED"} {
		g := mustPlace(t, topo, strings.Replace(claim, "%s", strength, 1), topo.Online)[0]
		if g.CPUs.String() != "1,3" {
			t.Fatalf("%s: got %s, want the two one-thread cores 1,3", strength, g.CPUs)
		}
	}
	g := mustPlace(t, topo, `{"cores": ["6"], "cpu attributes": [["CORE-SIBLING-REQUIRED"]], "mem attributes": ["NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED"]}`, topo.Online)[0]
	if g.CPUs.Len() != 6 || splitCores(topo, g.CPUs) != 0 || len(nodesOf(topo, g.CPUs)) != 2 {
		t.Fatalf("6 over two nodes: %s", g.CPUs)
	}
}
