// Package devices turns the machine's CPUs into the ResourceSlice devices the driver publishes.
package devices

import (
	"fmt"
	"sort"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/cpuset"
	"k8s.io/utils/ptr"

	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/mutant"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/topology"
)

// Modes: one device per CPU, or one device per NUMA node with consumable capacity (KEP-5075).
const (
	Individual = "individual"
	Grouped    = "grouped"
)

// Attribute and capacity names, in the driver's own domain unless qualified. Stable: the suites read
// them (README "Attributes"). The per-CPU names are those dra-driver-cpu publishes, so one check
// reads both drivers; the thread attributes and the standard NUMA attribute are added.
const (
	AttrCPUID          = "cpuID"
	AttrCoreID         = "coreID"
	AttrSocketID       = "socketID"
	AttrNUMANodeID     = "numaNodeID"
	AttrCacheL3ID      = "cacheL3ID"
	AttrCoreType       = "coreType"
	AttrSMTEnabled     = "smtEnabled"
	AttrThreadIndex    = "threadIndex"
	AttrThreadsPerCore = "threadsPerCore"
	AttrNumCPUs        = "numCPUs"
	// The standard attribute (KEP-6072, stable in 1.37): claims can match it across drivers.
	AttrStandardNUMA = "resource.kubernetes.io/numaNode"
	// CapacityCPU is the group devices' consumable capacity: a claim's share is this many CPUs.
	// Published as "<driver>/cpu" (CapacityName): the scheduler matches a claim's capacity request
	// to a device's capacity by the exact key, and claims name it qualified, as for dra-driver-cpu.
	CapacityCPU = "cpu"
)

// CapacityName is the group devices' capacity key for a driver: "<driver>/cpu".
func CapacityName(driver string) resourceapi.QualifiedName {
	return resourceapi.QualifiedName(driver + "/" + CapacityCPU)
}

// MaxDevicesPerSlice is resource.k8s.io/v1's limit on the devices of one ResourceSlice.
const MaxDevicesPerSlice = 128

// CPUDeviceName and GroupDeviceName are the device names (DNS labels) of the two modes.
func CPUDeviceName(cpu int) string    { return fmt.Sprintf("cpu-%d", cpu) }
func GroupDeviceName(node int) string { return fmt.Sprintf("numa-%d", node) }

// Publishable is the set of CPUs the driver offers: online minus reserved.
func Publishable(m *topology.Machine, reserved cpuset.CPUSet) cpuset.CPUSet {
	return m.Online.Difference(reserved)
}

// Order lists CPUs so that a core's threads are adjacent, cores grouped by NUMA node. The scheduler
// tries a slice's devices in order, so an individual-mode claim for N CPUs takes whole cores first.
func Order(m *topology.Machine, cpus cpuset.CPUSet, mut mutant.Name) []int {
	ids := cpus.List()
	if mut == mutant.SplitsCores {
		// Thread 0 of every core, then thread 1 of every core...: a 2-CPU claim gets two cores' halves.
		sort.SliceStable(ids, func(i, j int) bool { return m.CPUs[ids[i]].Thread < m.CPUs[ids[j]].Thread })
		return ids
	}
	key := func(c int) [4]int {
		cpu := m.CPUs[c]
		return [4]int{cpu.Node, cpu.Siblings.List()[0], cpu.Thread, c}
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := key(ids[i]), key(ids[j])
		for k := range a {
			if a[k] != b[k] {
				return a[k] < b[k]
			}
		}
		return false
	})
	return ids
}

func numaOf(node int, mut mutant.Name) int64 {
	if mut == mutant.WrongNUMAAttribute {
		return int64(node + 1)
	}
	return int64(node)
}

func intAttr(v int64) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{IntValue: ptr.To(v)}
}

// CPUDevice is the individual-mode device of one CPU.
func CPUDevice(m *topology.Machine, id int, mut mutant.Name) resourceapi.Device {
	cpu := m.CPUs[id]
	return resourceapi.Device{
		Name: CPUDeviceName(id),
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			AttrCPUID:          intAttr(int64(id)),
			AttrCoreID:         intAttr(int64(cpu.Core)),
			AttrSocketID:       intAttr(int64(cpu.Socket)),
			AttrNUMANodeID:     intAttr(numaOf(cpu.Node, mut)),
			AttrStandardNUMA:   intAttr(numaOf(cpu.Node, mut)),
			AttrCacheL3ID:      intAttr(int64(cpu.L3)),
			AttrCoreType:       {StringValue: ptr.To(cpu.CoreType)},
			AttrSMTEnabled:     {BoolValue: ptr.To(m.SMT)},
			AttrThreadIndex:    intAttr(int64(cpu.Thread)),
			AttrThreadsPerCore: intAttr(int64(cpu.Siblings.Size())),
		},
	}
}

// GroupDevice is the grouped-mode device of one NUMA node: shareable, its capacity the node's CPUs.
func GroupDevice(m *topology.Machine, driver string, node int, cpus cpuset.CPUSet, mut mutant.Name) resourceapi.Device {
	socket, threads := 0, 0
	for i, c := range cpus.List() {
		if i == 0 {
			socket = m.CPUs[c].Socket
		}
		threads = max(threads, m.CPUs[c].Siblings.Size())
	}
	one := resource.MustParse("1")
	return resourceapi.Device{
		Name: GroupDeviceName(node),
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			AttrNUMANodeID:     intAttr(numaOf(node, mut)),
			AttrStandardNUMA:   intAttr(numaOf(node, mut)),
			AttrSocketID:       intAttr(int64(socket)),
			AttrNumCPUs:        intAttr(int64(cpus.Size())),
			AttrSMTEnabled:     {BoolValue: ptr.To(m.SMT)},
			AttrThreadsPerCore: intAttr(int64(threads)),
		},
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			// Whole CPUs only: a request for 1.5 is rounded up by the scheduler (step 1).
			CapacityName(driver): {Value: *resource.NewQuantity(int64(cpus.Size()), resource.DecimalSI),
				RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: &one,
					ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: &one, Step: &one}}},
		},
		AllowMultipleAllocations: ptr.To(true),
	}
}

// List returns the devices of a mode, in publication order.
func List(m *topology.Machine, driver string, reserved cpuset.CPUSet, mode string, mut mutant.Name) ([]resourceapi.Device, error) {
	offered := Publishable(m, reserved)
	var out []resourceapi.Device
	switch mode {
	case Individual:
		for _, id := range Order(m, offered, mut) {
			out = append(out, CPUDevice(m, id, mut))
		}
	case Grouped:
		for _, node := range m.NodeIDs() {
			if cpus := m.Nodes[node].Intersection(offered); !cpus.IsEmpty() {
				out = append(out, GroupDevice(m, driver, node, cpus, mut))
			}
		}
	default:
		return nil, fmt.Errorf("--cpu-device-mode=%q: use %s or %s", mode, Individual, Grouped)
	}
	return out, nil
}

// Resources is the node's one pool (named after the node), split into slices of at most 128 devices.
func Resources(pool string, devs []resourceapi.Device) resourceslice.DriverResources {
	var slices []resourceslice.Slice
	for start := 0; start < len(devs); start += MaxDevicesPerSlice {
		slices = append(slices, resourceslice.Slice{Devices: devs[start:min(start+MaxDevicesPerSlice, len(devs))]})
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{pool: {Slices: slices}}}
}
