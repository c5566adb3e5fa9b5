// Package alloc picks the CPUs of a grouped-mode share: whole cores first, inside one NUMA node.
package alloc

import (
	"fmt"
	"sort"

	"k8s.io/utils/cpuset"

	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/mutant"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/topology"
)

// Pick chooses n CPUs of free. It takes whole free cores while n needs a whole core, then the rest from
// cores already split (fewest free threads first, the best fit), breaking a whole core only when no
// split core is left: the CPU manager's rule (KEP-2625 full-pcpus-only) that a workload should not
// share a core's threads with another when whole cores are free.
func Pick(m *topology.Machine, free cpuset.CPUSet, n int, mut mutant.Name) (cpuset.CPUSet, error) {
	if n < 1 {
		return cpuset.New(), fmt.Errorf("a share of %d CPUs: at least 1 is needed", n)
	}
	if free.Size() < n {
		return cpuset.New(), fmt.Errorf("%d CPUs asked, only %d free (%s)", n, free.Size(), free.String())
	}
	if mut == mutant.SplitsCores {
		return spread(m, free, n), nil
	}
	type core struct {
		free  cpuset.CPUSet
		whole bool
	}
	var cores []core
	for _, c := range m.Cores(free) {
		f := c.Intersection(free)
		cores = append(cores, core{free: f, whole: f.Equals(c)})
	}
	picked := cpuset.New()
	for i, c := range cores {
		if c.whole && n-picked.Size() >= c.free.Size() {
			picked = picked.Union(c.free)
			cores[i].free = cpuset.New()
		}
	}
	rest := cores[:0:0]
	for _, c := range cores {
		if !c.free.IsEmpty() {
			rest = append(rest, c)
		}
	}
	need := n - picked.Size()
	sort.SliceStable(rest, func(i, j int) bool {
		a, b := rest[i], rest[j]
		if a.whole != b.whole {
			return !a.whole // split cores before whole ones
		}
		aFits, bFits := a.free.Size() >= need, b.free.Size() >= need
		if aFits != bFits {
			return aFits
		}
		return a.free.Size() < b.free.Size()
	})
	for _, c := range rest {
		for _, id := range c.free.List() {
			if picked.Size() == n {
				return picked, nil
			}
			picked = picked.Union(cpuset.New(id))
		}
	}
	return picked, nil
}

// spread is the SplitsCores mutant: thread 0 of each core, then thread 1, and so on.
func spread(m *topology.Machine, free cpuset.CPUSet, n int) cpuset.CPUSet {
	ids := free.List()
	sort.SliceStable(ids, func(i, j int) bool { return m.CPUs[ids[i]].Thread < m.CPUs[ids[j]].Thread })
	return cpuset.New(ids[:n]...)
}

// SplitCores returns the cores cpus holds only part of (empty when cpus is whole cores).
func SplitCores(m *topology.Machine, cpus cpuset.CPUSet) []cpuset.CPUSet {
	var out []cpuset.CPUSet
	for _, c := range m.Cores(cpus) {
		if !c.IsSubsetOf(cpus) {
			out = append(out, c.Intersection(cpus))
		}
	}
	return out
}
