package main

// A minimal sysfs tree for the tests: nodes, cores with their threads, PCI devices.

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

type fakeMachine struct {
	nodes   [][][]int      // node -> cores -> thread ids
	devices map[string]int // PCI address -> numa_node
}

func write(t testing.TB, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (m fakeMachine) render(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	var online CPUSet
	var nodeIDs []int
	for n, cores := range m.nodes {
		nodeIDs = append(nodeIDs, n)
		var nodeCPUs CPUSet
		for _, threads := range cores {
			set := NewCPUSet(threads...)
			nodeCPUs = nodeCPUs.Union(set)
			for _, cpu := range threads {
				write(t, filepath.Join(root, fmt.Sprintf("devices/system/cpu/cpu%d/topology/core_cpus_list", cpu)),
					set.String())
			}
		}
		online = online.Union(nodeCPUs)
		write(t, filepath.Join(root, fmt.Sprintf("devices/system/node/node%d/cpulist", n)), nodeCPUs.String())
	}
	write(t, filepath.Join(root, "devices/system/cpu/online"), online.String())
	write(t, filepath.Join(root, "devices/system/node/online"), NewCPUSet(nodeIDs...).String())
	for addr, node := range m.devices {
		write(t, filepath.Join(root, "bus/pci/devices", addr, "numa_node"), fmt.Sprint(node))
	}
	return root
}

// smt2 is 2 nodes x 4 cores x 2 threads, Intel numbering: core c has threads c and c+8.
func smt2(t *testing.T) *Topology {
	t.Helper()
	m := fakeMachine{devices: map[string]int{"0000:3b:00.0": 1, "0000:00:1f.0": -1}}
	for n := 0; n < 2; n++ {
		var cores [][]int
		for c := 4 * n; c < 4*n+4; c++ {
			cores = append(cores, []int{c, c + 8})
		}
		m.nodes = append(m.nodes, cores)
	}
	topo, err := ReadTopology(m.render(t))
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func TestReadTopology(t *testing.T) {
	topo := smt2(t)
	if topo.Online.String() != "0-15" || topo.MaxT != 2 || len(topo.Cores) != 8 || len(topo.Nodes) != 2 {
		t.Fatalf("online %s maxT %d cores %d nodes %v", topo.Online, topo.MaxT, len(topo.Cores), topo.Nodes)
	}
	if got := topo.NodeCPUs[1].String(); got != "4-7,12-15" {
		t.Fatalf("node 1 cpus %s", got)
	}
	if c := topo.Cores[topo.CoreOf[13]]; c.Threads.String() != "5,13" || c.Node != 1 {
		t.Fatalf("core of 13: %s on %d", c.Threads, c.Node)
	}
	if n, err := topo.DeviceNode("0000:3b:00.0"); err != nil || n != 1 {
		t.Fatalf("device node %d %v", n, err)
	}
	for _, bad := range []string{"0000:00:1f.0", "0000:99:00.0"} {
		if _, err := topo.DeviceNode(bad); err == nil {
			t.Fatalf("device %s has no CPU node but was accepted", bad)
		}
	}
}
