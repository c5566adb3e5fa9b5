// Package topology reads a machine's CPUs from a sysfs tree below a configurable root.
package topology

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// CPU is one online logical CPU as sysfs describes it.
type CPU struct {
	ID     int
	Socket int // topology/physical_package_id
	Core   int // topology/core_id: unique only within a socket, as on real machines
	Node   int // the NUMA node whose cpulist holds it
	L3     int // id of the level-3 cache it shares, -1 when sysfs shows none
	// Siblings are the online threads of its core, itself included (topology/thread_siblings_list).
	Siblings cpuset.CPUSet
	// Thread is its position among Siblings (0 for the lowest id).
	Thread   int
	CoreType string // "p-core" or "e-core" on hybrid parts (devices/cpu_core, cpu_atom), else "standard"
}

// Machine is the node's online CPUs and their NUMA nodes.
type Machine struct {
	CPUs   map[int]CPU
	Online cpuset.CPUSet
	Nodes  map[int]cpuset.CPUSet // NUMA node -> its online CPUs
	SMT    bool                  // devices/system/cpu/smt/control is "on"
}

// Read reads the machine below root (a directory holding devices/system/{cpu,node}, i.e. a /sys).
func Read(sysRoot string) (*Machine, error) {
	cpuDir := filepath.Join(sysRoot, "devices", "system", "cpu")
	online, err := readCPUList(filepath.Join(cpuDir, "online"))
	if err != nil {
		return nil, err
	}
	if online.IsEmpty() {
		return nil, fmt.Errorf("%s lists no online CPU", filepath.Join(cpuDir, "online"))
	}
	m := &Machine{CPUs: map[int]CPU{}, Online: online, Nodes: map[int]cpuset.CPUSet{}}
	nodeOf, err := readNodes(filepath.Join(sysRoot, "devices", "system", "node"), online, m)
	if err != nil {
		return nil, err
	}
	types, err := readCoreTypes(sysRoot)
	if err != nil {
		return nil, err
	}
	control, err := os.ReadFile(filepath.Join(cpuDir, "smt", "control"))
	// Kernels without SMT support have no smt/control: SMT is off.
	m.SMT = err == nil && strings.TrimSpace(string(control)) == "on"
	for _, id := range online.List() {
		cpu, err := readCPU(cpuDir, id, online)
		if err != nil {
			return nil, err
		}
		node, ok := nodeOf[id]
		if !ok {
			return nil, fmt.Errorf("online CPU %d is in no NUMA node's cpulist under %s", id,
				filepath.Join(sysRoot, "devices", "system", "node"))
		}
		cpu.Node = node
		if t, ok := types[id]; ok {
			cpu.CoreType = t
		}
		m.CPUs[id] = cpu
	}
	return m, nil
}

func readCPU(cpuDir string, id int, online cpuset.CPUSet) (CPU, error) {
	topo := filepath.Join(cpuDir, fmt.Sprintf("cpu%d", id), "topology")
	cpu := CPU{ID: id, L3: -1, CoreType: "standard"}
	var err error
	if cpu.Socket, err = readInt(filepath.Join(topo, "physical_package_id")); err != nil {
		return cpu, err
	}
	if cpu.Core, err = readInt(filepath.Join(topo, "core_id")); err != nil {
		return cpu, err
	}
	siblings, err := readCPUList(filepath.Join(topo, "thread_siblings_list"))
	if err != nil {
		return cpu, err
	}
	// An offline sibling runs nothing: the core's usable threads are its online ones.
	cpu.Siblings = siblings.Intersection(online).Union(cpuset.New(id))
	for _, s := range cpu.Siblings.List() {
		if s < id {
			cpu.Thread++
		}
	}
	caches, _ := filepath.Glob(filepath.Join(cpuDir, fmt.Sprintf("cpu%d", id), "cache", "index*"))
	for _, dir := range caches {
		if level, err := readInt(filepath.Join(dir, "level")); err == nil && level == 3 {
			if cpu.L3, err = readInt(filepath.Join(dir, "id")); err != nil {
				return cpu, err
			}
		}
	}
	return cpu, nil
}

func readNodes(nodeDir string, online cpuset.CPUSet, m *Machine) (map[int]int, error) {
	dirs, err := filepath.Glob(filepath.Join(nodeDir, "node[0-9]*"))
	if err != nil || len(dirs) == 0 {
		return nil, fmt.Errorf("no NUMA node under %s: the driver needs devices/system/node of the node's sysfs", nodeDir)
	}
	sort.Strings(dirs)
	nodeOf := map[int]int{}
	for _, dir := range dirs {
		node, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(dir), "node"))
		if err != nil {
			continue
		}
		cpus, err := readCPUList(filepath.Join(dir, "cpulist"))
		if err != nil {
			return nil, err
		}
		cpus = cpus.Intersection(online)
		if cpus.IsEmpty() {
			continue // a memory-only node (CXL tier) has no CPU to publish
		}
		m.Nodes[node] = cpus
		for _, c := range cpus.List() {
			nodeOf[c] = node
		}
	}
	return nodeOf, nil
}

// readCoreTypes maps CPU ids to "p-core"/"e-core" on hybrid parts; other CPUs are "standard".
func readCoreTypes(sysRoot string) (map[int]string, error) {
	out := map[int]string{}
	for dir, name := range map[string]string{"cpu_core": "p-core", "cpu_atom": "e-core"} {
		path := filepath.Join(sysRoot, "devices", dir, "cpus")
		if _, err := os.Stat(path); err != nil {
			continue
		}
		cpus, err := readCPUList(path)
		if err != nil {
			return nil, err
		}
		for _, c := range cpus.List() {
			out[c] = name
		}
	}
	return out, nil
}

func readInt(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, fmt.Errorf("%s: not an integer: %q", path, strings.TrimSpace(string(data)))
	}
	return v, nil
}

func readCPUList(path string) (cpuset.CPUSet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return cpuset.New(), fmt.Errorf("read %s: %w", path, err)
	}
	set, err := cpuset.Parse(strings.TrimSpace(string(data)))
	if err != nil {
		return cpuset.New(), fmt.Errorf("%s: not a CPU list: %w", path, err)
	}
	return set, nil
}

// Cores returns the machine's cores (sets of sibling threads), ordered by their lowest CPU id.
func (m *Machine) Cores(within cpuset.CPUSet) []cpuset.CPUSet {
	seen := map[string]bool{}
	var cores []cpuset.CPUSet
	for _, id := range within.List() {
		core := m.CPUs[id].Siblings
		if key := core.String(); !seen[key] {
			seen[key] = true
			cores = append(cores, core)
		}
	}
	return cores
}

// NodeIDs returns the NUMA nodes that have online CPUs, in order.
func (m *Machine) NodeIDs() []int {
	ids := make([]int, 0, len(m.Nodes))
	for id := range m.Nodes {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	return ids
}
