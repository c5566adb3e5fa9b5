package topology_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/fixture"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/topology"
)

func TestIntelNumbering(t *testing.T) {
	m := fixture.Machine(t, "server-2s8c-smt2-intel")
	if m.Online.Size() != 32 || len(m.Nodes) != 2 || !m.SMT {
		t.Fatalf("online %s, nodes %d, smt %v; want 32 CPUs, 2 nodes, SMT on", m.Online, len(m.Nodes), m.SMT)
	}
	if got := m.Nodes[1].String(); got != "8-15,24-31" {
		t.Errorf("node 1 CPUs %s, want 8-15,24-31", got)
	}
	c := m.CPUs[17]
	if c.Socket != 0 || c.Core != 1 || c.Node != 0 || c.Thread != 1 || !c.Siblings.Equals(cpuset.New(1, 17)) {
		t.Errorf("cpu17 = %+v, want socket 0 core 1 node 0 thread 1 siblings 1,17", c)
	}
	if m.CPUs[24].L3 == m.CPUs[0].L3 || m.CPUs[24].L3 < 0 {
		t.Errorf("L3 ids cpu0 %d cpu24 %d: want one per socket", m.CPUs[0].L3, m.CPUs[24].L3)
	}
	if n := len(m.Cores(m.Online)); n != 16 {
		t.Errorf("%d cores, want 16", n)
	}
}

func TestSMT4(t *testing.T) {
	m := fixture.Machine(t, "smt4-2s")
	c := m.CPUs[33]
	if !c.Siblings.Equals(cpuset.New(1, 17, 33, 49)) || c.Thread != 2 {
		t.Errorf("cpu33 siblings %s thread %d, want 1,17,33,49 and 2", c.Siblings, c.Thread)
	}
}

func TestOfflineSiblingsAndMissingCores(t *testing.T) {
	m := fixture.Machine(t, "sparse-offline")
	if got := m.Online.String(); got != "0-2,4-6,8-11,13-14" {
		t.Fatalf("online %s", got)
	}
	// CPU 12, the sibling of 4, is offline: 4 is a core of one usable thread.
	if !m.CPUs[4].Siblings.Equals(cpuset.New(4)) {
		t.Errorf("cpu4 siblings %s, want 4 alone", m.CPUs[4].Siblings)
	}
	if _, ok := m.CPUs[3]; ok {
		t.Error("offline CPU 3 was read as a CPU")
	}
}

func TestHybridCoreTypes(t *testing.T) {
	m := fixture.Machine(t, "hybrid-8p8e")
	if m.CPUs[0].CoreType != "p-core" || m.CPUs[16].CoreType != "e-core" {
		t.Errorf("core types cpu0 %q cpu16 %q", m.CPUs[0].CoreType, m.CPUs[16].CoreType)
	}
	if fixture.Machine(t, "laptop-1s4c-smt2").CPUs[0].CoreType != "standard" {
		t.Error("a non-hybrid CPU should be standard")
	}
}

func TestMemoryOnlyNodesHaveNoCPUs(t *testing.T) {
	m := fixture.Machine(t, "memory-tiers-cxl")
	if ids := m.NodeIDs(); len(ids) != 2 || ids[0] != 0 || ids[1] != 1 {
		t.Errorf("nodes with CPUs %v, want [0 1] (2 and 3 are CXL memory)", ids)
	}
}

func TestMissingFilesNameThePath(t *testing.T) {
	dir := t.TempDir()
	_, err := topology.Read(dir)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "devices", "system", "cpu", "online")) {
		t.Fatalf("error %v should name the online file", err)
	}
	cpu := filepath.Join(dir, "devices", "system", "cpu")
	must(t, os.MkdirAll(filepath.Join(cpu, "cpu0", "topology"), 0o755))
	must(t, os.WriteFile(filepath.Join(cpu, "online"), []byte("0\n"), 0o644))
	must(t, os.MkdirAll(filepath.Join(dir, "devices", "system", "node", "node0"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "devices", "system", "node", "node0", "cpulist"), []byte("0\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(cpu, "cpu0", "topology", "physical_package_id"), []byte("x\n"), 0o644))
	if _, err := topology.Read(dir); err == nil || !strings.Contains(err.Error(), "physical_package_id: not an integer") {
		t.Fatalf("error %v should say physical_package_id is not an integer", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
