package alloc_test

import (
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/alloc"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/fixture"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/mutant"
)

func TestWholeCoresFirst(t *testing.T) {
	cases := []struct {
		machine    string
		n          int
		wantCores  int // whole cores in the pick
		wantSplits int // cores held in part
	}{
		{"laptop-1s4c-smt2", 4, 2, 0},
		{"laptop-1s4c-smt2", 3, 1, 1},
		{"server-2s8c-smt2-intel", 6, 3, 0},
		{"smt4-2s", 8, 2, 0},
		{"smt4-2s", 6, 1, 1},
		{"smt4-2s", 2, 0, 1},
	}
	for _, c := range cases {
		m := fixture.Machine(t, c.machine)
		free := m.Nodes[0]
		got, err := alloc.Pick(m, free, c.n, mutant.None)
		if err != nil || got.Size() != c.n || !got.IsSubsetOf(free) {
			t.Fatalf("%s n=%d: got %s err %v", c.machine, c.n, got, err)
		}
		whole := 0
		for _, core := range m.Cores(got) {
			if core.IsSubsetOf(got) {
				whole++
			}
		}
		if splits := alloc.SplitCores(m, got); whole != c.wantCores || len(splits) != c.wantSplits {
			t.Errorf("%s n=%d: %s has %d whole cores and %d split, want %d and %d", c.machine, c.n, got,
				whole, len(splits), c.wantCores, c.wantSplits)
		}
	}
}

// A share that needs part of a core takes it from a core already split, not from a whole one.
func TestRemainderFromSplitCore(t *testing.T) {
	m := fixture.Machine(t, "laptop-1s4c-smt2")
	first, _ := alloc.Pick(m, m.Online, 1, mutant.None)
	free := m.Online.Difference(first)
	second, _ := alloc.Pick(m, free, 1, mutant.None)
	if !first.Union(second).Equals(m.CPUs[first.List()[0]].Siblings) {
		t.Errorf("two 1-CPU shares %s and %s should fill one core", first, second)
	}
}

func TestNotEnoughFree(t *testing.T) {
	m := fixture.Machine(t, "laptop-1s4c-smt2")
	if _, err := alloc.Pick(m, cpuset.New(1, 2), 3, mutant.None); err == nil {
		t.Error("3 of 2 free CPUs picked")
	}
	if _, err := alloc.Pick(m, m.Online, 0, mutant.None); err == nil {
		t.Error("a share of 0 CPUs picked")
	}
}

func TestMutantSplitsCores(t *testing.T) {
	for _, name := range []string{"laptop-1s4c-smt2", "smt4-2s"} {
		m := fixture.Machine(t, name)
		got, _ := alloc.Pick(m, m.Nodes[0], 4, mutant.SplitsCores)
		if len(alloc.SplitCores(m, got)) == 0 {
			t.Errorf("%s: the mutant's 4 CPUs %s are whole cores", name, got)
		}
	}
}
