package main

// Placement: which CPUs a core group gets (docs/spec.md S2.2-S2.11). Required attributes are never
// relaxed; a preference is tried first and dropped only when no placement meets it (S2.11).

import (
	"fmt"
	"sort"
)

// Grant is the placement of one group.
type Grant struct {
	CPUs     CPUSet
	Withheld CPUSet // CORE-SIBLING-DENIED siblings kept from everyone (S2.4)
}

// wholeCores gives the cores among candidates whose every thread is in region.
func (t *Topology) wholeCores(region CPUSet, candidates []int) []int {
	var out []int
	for _, i := range candidates {
		if t.Cores[i].Threads.SubsetOf(region) {
			out = append(out, i)
		}
	}
	return out
}

// allCores is every core index, for placements not bound to one node.
func (t *Topology) allCores() []int {
	out := make([]int, len(t.Cores))
	for i := range out {
		out[i] = i
	}
	return out
}

// pickIn places n CPUs inside region under the sibling rule; free is what the group may touch at all
// (DENIED siblings must be free too, S2.4).
// candidates are the cores region can touch (a node's cores, or all), so the work is per node.
func (t *Topology) pickIn(region CPUSet, candidates []int, n int, sib siblingMode) (Grant, bool) {
	var g Grant
	switch sib {
	case sibRequired:
		// Whole cores only; largest first so hybrid parts use P-cores before E-cores and the sum is exact
		// (thread counts 4, 2 and 1 divide each other, so largest-first never misses an exact sum).
		cores := t.wholeCores(region, candidates)
		sort.SliceStable(cores, func(a, b int) bool { return t.Cores[cores[a]].Threads.Len() > t.Cores[cores[b]].Threads.Len() })
		left := n
		for _, ci := range cores {
			if k := t.Cores[ci].Threads.Len(); k <= left {
				g.CPUs = g.CPUs.Union(t.Cores[ci].Threads)
				left -= k
			}
		}
		return g, left == 0
	case sibDenied:
		// One thread per core whose every thread is free; its siblings are withheld. Cores with fewest
		// threads first: a 1-thread core withholds nothing.
		cores := t.wholeCores(region, candidates)
		sort.SliceStable(cores, func(a, b int) bool { return t.Cores[cores[a]].Threads.Len() < t.Cores[cores[b]].Threads.Len() })
		if len(cores) < n {
			return g, false
		}
		for _, ci := range cores[:n] {
			threads := t.Cores[ci].Threads.List()
			g.CPUs.Add(threads[0])
			g.Withheld = g.Withheld.Union(NewCPUSet(threads[1:]...))
		}
		return g, true
	}
	// PREFERRED (and the default): whole cores first, then the remainder from one core, so at most one
	// core of the grant is split when the region's whole cores allow it; else any free threads.
	if region.Len() < n {
		return g, false
	}
	cores := t.wholeCores(region, candidates)
	sort.SliceStable(cores, func(a, b int) bool { return t.Cores[cores[a]].Threads.Len() > t.Cores[cores[b]].Threads.Len() })
	left := n
	for _, ci := range cores {
		if left == 0 {
			break
		}
		if k := t.Cores[ci].Threads.Len(); k <= left {
			g.CPUs = g.CPUs.Union(t.Cores[ci].Threads)
			left -= k
		}
	}
	if left == 0 {
		return g, true
	}
	rest := region.Minus(g.CPUs)
	// The remainder from the core with the fewest free threads that still holds it (leftovers of a
	// partly used core before breaking a whole one).
	best, bestFree := -1, 0
	for _, i := range candidates {
		free := t.Cores[i].Threads.IntersectLen(rest)
		if free >= left && (best < 0 || free < bestFree) {
			best, bestFree = i, free
		}
	}
	if best >= 0 {
		ids := t.Cores[best].Threads.Intersect(rest).List()
		g.CPUs = g.CPUs.Union(NewCPUSet(ids[:left]...))
		return g, true
	}
	// No single core holds the remainder: fill from partly free cores, fullest first.
	order := append([]int(nil), candidates...)
	sort.SliceStable(order, func(a, b int) bool {
		return t.Cores[order[a]].Threads.IntersectLen(rest) > t.Cores[order[b]].Threads.IntersectLen(rest)
	})
	for _, ci := range order {
		for _, id := range t.Cores[ci].Threads.Intersect(rest).List() {
			if left == 0 {
				break
			}
			g.CPUs.Add(id)
			left--
		}
	}
	return g, left == 0
}

// wholeCapacity is how many CPUs of region sit in whole free cores among candidates.
func (t *Topology) wholeCapacity(region CPUSet, candidates []int) int {
	n := 0
	for _, ci := range t.wholeCores(region, candidates) {
		n += t.Cores[ci].Threads.Len()
	}
	return n
}

// singleNode places the group on one of nodes: first where whole cores hold it (S2.4 packing), then
// anywhere a node holds it; among equals the node with the fewest free CPUs (keep big nodes whole).
func (t *Topology) singleNode(nodes []int, free CPUSet, n int, sib siblingMode) (Grant, bool) {
	type option struct {
		node, free int
		region     CPUSet
		whole      bool
	}
	var options []option
	for _, node := range nodes {
		region := t.NodeCPUs[node].Intersect(free)
		if region.Len() < n {
			continue // cannot hold the group whatever the sibling rule
		}
		options = append(options, option{node, region.Len(), region, t.wholeCapacity(region, t.NodeCores[node]) >= n})
	}
	sort.SliceStable(options, func(a, b int) bool {
		if options[a].whole != options[b].whole {
			return options[a].whole
		}
		return options[a].free < options[b].free
	})
	for _, o := range options {
		if g, ok := t.pickIn(o.region, t.NodeCores[o.node], n, sib); ok {
			return g, true
		}
	}
	return Grant{}, false
}

// interleave spreads the group over every NUMA node with CPUs (S2.6), in units of whole cores for
// CORE-SIBLING-REQUIRED.
func (t *Topology) interleave(free CPUSet, n int, sib siblingMode) (Grant, bool) {
	if sib == sibRequired {
		return t.interleaveWholeCores(free, n)
	}
	unit := 1
	if n < len(t.Nodes) {
		return Grant{}, false
	}
	capacity := map[int]int{}
	for _, node := range t.Nodes {
		region := t.NodeCPUs[node].Intersect(free)
		switch sib {
		case sibDenied:
			capacity[node] = len(t.wholeCores(region, t.NodeCores[node]))
		default:
			capacity[node] = region.Len()
		}
		if capacity[node] < 1 {
			return Grant{}, false
		}
	}
	quota := map[int]int{}
	left := n / unit
	for left > 0 {
		progress := false
		for _, node := range t.Nodes {
			if left > 0 && quota[node] < capacity[node] {
				quota[node]++
				left--
				progress = true
			}
		}
		if !progress {
			return Grant{}, false
		}
	}
	var out Grant
	for _, node := range t.Nodes {
		g, ok := t.pickIn(t.NodeCPUs[node].Intersect(free), t.NodeCores[node], quota[node]*unit, sib)
		if !ok {
			return Grant{}, false
		}
		out.CPUs = out.CPUs.Union(g.CPUs)
		out.Withheld = out.Withheld.Union(g.Withheld)
	}
	return out, true
}

// interleaveWholeCores spreads n CPUs of whole cores over every CPU node. A core counts with its online
// threads, so a core whose sibling is offline is a whole core of one CPU (sparse machines): the share
// of each node must be an exact sum of its free cores' sizes, found by a subset-sum over the nodes.
func (t *Topology) interleaveWholeCores(free CPUSet, n int) (Grant, bool) {
	k := len(t.Nodes)
	sums := make([][]bool, k) // sums[i][s]: node i's whole free cores can give exactly s >= 1 CPUs
	for i, node := range t.Nodes {
		sums[i] = make([]bool, n+1)
		sums[i][0] = true
		for _, ci := range t.wholeCores(t.NodeCPUs[node].Intersect(free), t.NodeCores[node]) {
			size := t.Cores[ci].Threads.Len()
			for s := n; s >= size; s-- {
				sums[i][s] = sums[i][s] || sums[i][s-size]
			}
		}
		sums[i][0] = false // every node gets at least one CPU (S2.6)
	}
	// rest[i][s]: nodes i.. can give exactly s together.
	rest := make([][]bool, k+1)
	rest[k] = make([]bool, n+1)
	rest[k][0] = true
	for i := k - 1; i >= 0; i-- {
		rest[i] = make([]bool, n+1)
		limit := t.NodeCPUs[t.Nodes[i]].Len() // a node never gives more than its CPUs: O(k * n * node size)
		for s := 0; s <= n; s++ {
			for q := 1; q <= s && q <= limit && !rest[i][s]; q++ {
				rest[i][s] = sums[i][q] && rest[i+1][s-q]
			}
		}
	}
	if !rest[0][n] {
		return Grant{}, false
	}
	var out Grant
	left := n
	for i, node := range t.Nodes {
		// The share closest to an even split that still lets the other nodes finish exactly.
		target, best := left/(k-i), -1
		for q := 1; q <= left; q++ {
			if sums[i][q] && rest[i+1][left-q] && (best < 0 || abs(q-target) < abs(best-target)) {
				best = q
			}
		}
		g, ok := t.pickIn(t.NodeCPUs[node].Intersect(free), t.NodeCores[node], best, sibRequired)
		if !ok {
			return Grant{}, false
		}
		out.CPUs = out.CPUs.Union(g.CPUs)
		left -= best
	}
	return out, true
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// placeCount places exactly n CPUs for g from free; deviceNode is -1 without a device affinity.
func (t *Topology) placeCount(g Group, n int, free CPUSet, deviceNode int) (Grant, bool) {
	single := func(nodes []int) func() (Grant, bool) {
		return func() (Grant, bool) { return t.singleNode(nodes, free, n, g.Sibling) }
	}
	spread := func() (Grant, bool) { return t.interleave(free, n, g.Sibling) }
	anywhere := func() (Grant, bool) {
		if gr, ok := t.singleNode(t.Nodes, free, n, g.Sibling); ok { // one node keeps memory local
			return gr, true
		}
		return t.pickIn(free, t.allCores(), n, g.Sibling)
	}
	var attempts []func() (Grant, bool)
	device := []int{deviceNode}
	switch {
	case g.Dev == devRequired: // S2.7; INTERLEAVE-REQUIRED with it was refused as a contradiction
		attempts = append(attempts, single(device))
	case g.Mem == interleaveRequired: // a required attribute beats the preferred device (S2.7)
		attempts = append(attempts, spread)
	case g.Mem == bindRequired:
		if g.Dev == devPreferred {
			attempts = append(attempts, single(device))
		}
		attempts = append(attempts, single(t.Nodes))
	default:
		if g.Dev == devPreferred { // between preferences, the device beats interleave (S2.7)
			attempts = append(attempts, single(device))
		}
		switch g.Mem {
		case bindPreferred:
			attempts = append(attempts, single(t.Nodes), anywhere)
		case interleavePreferred:
			attempts = append(attempts, spread, anywhere)
		default:
			attempts = append(attempts, anywhere)
		}
	}
	for _, try := range attempts {
		if gr, ok := try(); ok {
			return gr, true
		}
	}
	return Grant{}, false
}

// PlaceClaim places every group in claim order; free is availableCpus minus what the driver withholds.
// Each group's CPUs and withheld siblings leave the pool of the groups after it (S2.2: disjoint).
func (t *Topology) PlaceClaim(groups []Group, free CPUSet) ([]Grant, error) {
	free = free.Intersect(t.Online)
	out := make([]Grant, len(groups))
	for i, g := range groups {
		lo, hi := g.Lo, g.Hi
		if g.Sibling == sibRequired && !hasMultiple(lo, hi, t.MaxT) {
			return nil, claimErr(keyCores, i, "CORE-SIBLING-REQUIRED needs a count that is a multiple of %d "+
				"(the machine's threads per core, S2.4); fix: ask for a multiple of %d", t.MaxT, t.MaxT)
		}
		if g.Mem == interleaveRequired && hi < len(t.Nodes) {
			return nil, claimErr(keyMem, i, "NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED needs at least one CPU on each "+
				"of the %d NUMA nodes with CPUs (S2.6); fix: ask for at least %d CPUs", len(t.Nodes), len(t.Nodes))
		}
		deviceNode := -1
		if g.Dev != devNone {
			node, err := t.DeviceNode(g.Device)
			if err != nil {
				return nil, fmt.Errorf("claim parameters: `%s`[%d]: %v", keyDev, i, err)
			}
			deviceNode = node
		}
		placed := false
		// A range: the most CPUs that fit (S2.8); the count is then fixed for the admission's life.
		for n := min(hi, free.Len()); n >= lo && !placed; n-- {
			if g.Sibling == sibRequired && n%t.MaxT != 0 {
				continue
			}
			if gr, ok := t.placeCount(g, n, free, deviceNode); ok {
				out[i], placed = gr, true
			}
		}
		if !placed {
			return nil, fmt.Errorf("core group %d (`cores`[%d] = %s) cannot be placed on the %d free CPUs (%s) under "+
				"its attributes; fix: wait for CPUs to be freed or ask for fewer", i, i, countText(g), free.Len(), free)
		}
		free = free.Minus(out[i].CPUs).Minus(out[i].Withheld)
	}
	return out, nil
}

func hasMultiple(lo, hi, m int) bool {
	return m > 0 && (hi/m)*m >= lo
}

func countText(g Group) string {
	if g.Lo == g.Hi {
		return fmt.Sprintf("%d", g.Lo)
	}
	return fmt.Sprintf("%d-%d", g.Lo, g.Hi)
}
