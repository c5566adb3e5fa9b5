package main

// The machine as the driver sees it, read from a directory standing for /sys (docs/spec.md S2.3-S2.7
// speak of physical cores, their threads, NUMA nodes with CPUs and a PCI device's NUMA node).

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Core is one physical core: its online threads, lowest id first.
type Core struct {
	Threads CPUSet
	Node    int
}

// Topology is what placement needs.
type Topology struct {
	Online    CPUSet
	Cores     []Core      // ordered by (node, lowest thread)
	CoreOf    map[int]int // cpu -> index into Cores
	Nodes     []int       // NUMA nodes that have online CPUs, ascending (S2.6: CPU-less nodes do not count)
	NodeCPUs  map[int]CPUSet
	NodeCores map[int][]int // node -> indices into Cores
	MaxT      int           // the machine's largest number of threads per core (S2.4)
	sysRoot   string
	onlineTx  string
}

func readTrim(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func readList(path string) (CPUSet, error) {
	t, err := readTrim(path)
	if err != nil {
		return CPUSet{}, err
	}
	s, err := ParseCPUList(t)
	if err != nil {
		return CPUSet{}, fmt.Errorf("%s: %v", path, err)
	}
	return s, nil
}

// ReadTopology reads sysRoot (a directory laid out like /sys).
func ReadTopology(sysRoot string) (*Topology, error) {
	cpuDir := filepath.Join(sysRoot, "devices/system/cpu")
	onlineTx, err := readTrim(filepath.Join(cpuDir, "online"))
	if err != nil {
		return nil, fmt.Errorf("reading the online CPUs: %v", err)
	}
	online, err := ParseCPUList(onlineTx)
	if err != nil || online.IsEmpty() {
		return nil, fmt.Errorf("%s/online: no online CPU in %q", cpuDir, onlineTx)
	}
	t := &Topology{Online: online, CoreOf: map[int]int{}, NodeCPUs: map[int]CPUSet{}, sysRoot: sysRoot,
		onlineTx: onlineTx}

	nodeDir := filepath.Join(sysRoot, "devices/system/node")
	nodeList, err := readList(filepath.Join(nodeDir, "online"))
	if err != nil {
		// A machine without NUMA support exposes no node directory: it is one node, 0.
		nodeList = NewCPUSet(0)
		t.NodeCPUs[0] = online
	} else {
		for _, n := range nodeList.List() {
			cpus, err := readList(filepath.Join(nodeDir, fmt.Sprintf("node%d", n), "cpulist"))
			if err != nil {
				return nil, fmt.Errorf("reading NUMA node %d: %v", n, err)
			}
			t.NodeCPUs[n] = cpus.Intersect(online)
		}
	}
	nodeOf := map[int]int{}
	for n, cpus := range t.NodeCPUs {
		if !cpus.IsEmpty() {
			t.Nodes = append(t.Nodes, n)
		}
		for _, c := range cpus.List() {
			nodeOf[c] = n
		}
	}
	sort.Ints(t.Nodes)

	seen := CPUSet{}
	for _, cpu := range online.List() {
		if seen.Has(cpu) {
			continue
		}
		base := filepath.Join(cpuDir, fmt.Sprintf("cpu%d", cpu), "topology")
		threads, err := readList(filepath.Join(base, "core_cpus_list"))
		if err != nil { // kernels before 5.7 only have the older name
			if threads, err = readList(filepath.Join(base, "thread_siblings_list")); err != nil {
				return nil, fmt.Errorf("reading the core of CPU %d: %v", cpu, err)
			}
		}
		threads = threads.Intersect(online)
		threads.Add(cpu)
		node, ok := nodeOf[cpu]
		if !ok {
			return nil, fmt.Errorf("CPU %d is online but in no NUMA node's cpulist under %s", cpu, nodeDir)
		}
		t.Cores = append(t.Cores, Core{Threads: threads, Node: node})
		seen = seen.Union(threads)
	}
	sort.SliceStable(t.Cores, func(i, j int) bool {
		if t.Cores[i].Node != t.Cores[j].Node {
			return t.Cores[i].Node < t.Cores[j].Node
		}
		return t.Cores[i].Threads.List()[0] < t.Cores[j].Threads.List()[0]
	})
	t.NodeCores = map[int][]int{}
	for i, c := range t.Cores {
		t.NodeCores[c.Node] = append(t.NodeCores[c.Node], i)
		for _, cpu := range c.Threads.List() {
			t.CoreOf[cpu] = i
		}
		if n := c.Threads.Len(); n > t.MaxT {
			t.MaxT = n
		}
	}
	return t, nil
}

// Stale tells whether the online CPUs changed since the topology was read (CPU hotplug).
func (t *Topology) Stale() bool {
	now, err := readTrim(filepath.Join(t.sysRoot, "devices/system/cpu/online"))
	return err == nil && now != t.onlineTx
}

var pciAddress = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// DeviceNode is the NUMA node of a PCI device (S2.7), or an error saying why it has none usable.
func (t *Topology) DeviceNode(address string) (int, error) {
	path := filepath.Join(t.sysRoot, "bus/pci/devices", address, "numa_node")
	text, err := readTrim(path)
	if err != nil {
		return 0, fmt.Errorf("device %q does not exist on this node (no %s); fix: name a PCI device of "+
			"the node by its lower-case address", address, filepath.Join("/sys/bus/pci/devices", address))
	}
	n, err := strconv.Atoi(text)
	if err != nil || n < 0 || t.NodeCPUs[n].IsEmpty() {
		return 0, fmt.Errorf("device %q has no NUMA node with CPUs (numa_node %q); fix: drop its affinity or "+
			"name a device local to a CPU node", address, text)
	}
	return n, nil
}
