package devices_test

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/cpuset"

	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/devices"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/fixture"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/mutant"
)

func intOf(t *testing.T, d resourceapi.Device, name resourceapi.QualifiedName) int {
	t.Helper()
	a, ok := d.Attributes[name]
	if !ok || a.IntValue == nil {
		t.Fatalf("device %s has no int attribute %s", d.Name, name)
	}
	return int(*a.IntValue)
}

func TestIndividualPublishesOnlineMinusReservedWithSysfsAttributes(t *testing.T) {
	m := fixture.Machine(t, "server-2s8c-smt2-intel")
	devs, err := devices.List(m, "d.example", cpuset.New(0, 16), devices.Individual, mutant.None)
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 30 {
		t.Fatalf("%d devices, want 32 online - 2 reserved", len(devs))
	}
	seen := cpuset.New()
	for _, d := range devs {
		id := intOf(t, d, devices.AttrCPUID)
		cpu := m.CPUs[id]
		seen = seen.Union(cpuset.New(id))
		if d.Name != devices.CPUDeviceName(id) || intOf(t, d, devices.AttrNUMANodeID) != cpu.Node ||
			intOf(t, d, devices.AttrStandardNUMA) != cpu.Node || intOf(t, d, devices.AttrSocketID) != cpu.Socket ||
			intOf(t, d, devices.AttrCoreID) != cpu.Core || intOf(t, d, devices.AttrThreadIndex) != cpu.Thread ||
			intOf(t, d, devices.AttrThreadsPerCore) != 2 || intOf(t, d, devices.AttrCacheL3ID) != cpu.L3 {
			t.Errorf("device %s attributes %v disagree with sysfs %+v", d.Name, d.Attributes, cpu)
		}
		if *d.Attributes[devices.AttrSMTEnabled].BoolValue != true || *d.Attributes[devices.AttrCoreType].StringValue != "standard" {
			t.Errorf("device %s: smtEnabled/coreType wrong: %v", d.Name, d.Attributes)
		}
	}
	if !seen.Equals(m.Online.Difference(cpuset.New(0, 16))) {
		t.Errorf("published CPUs %s", seen)
	}
}

// The scheduler tries a slice's devices in order: a core's threads must be adjacent.
func TestIndividualOrderKeepsCoresTogether(t *testing.T) {
	for _, name := range []string{"server-2s8c-smt2-intel", "smt4-2s"} {
		m := fixture.Machine(t, name)
		order := devices.Order(m, m.Online, mutant.None)
		per := m.CPUs[0].Siblings.Size()
		for i := 0; i < len(order); i += per {
			core := cpuset.New(order[i : i+per]...)
			if !core.Equals(m.CPUs[order[i]].Siblings) {
				t.Fatalf("%s: devices %d..%d are %s, not one core", name, i, i+per-1, core)
			}
		}
		if m.CPUs[order[0]].Node != 0 || m.CPUs[order[len(order)-1]].Node != 1 {
			t.Errorf("%s: node 0's devices should come first", name)
		}
	}
}

func TestGroupedOneShareableDevicePerNode(t *testing.T) {
	m := fixture.Machine(t, "server-2s8c-smt2-intel")
	devs, err := devices.List(m, "d.example", cpuset.New(8), devices.Grouped, mutant.None)
	if err != nil || len(devs) != 2 {
		t.Fatalf("devices %v, err %v: want one per NUMA node", devs, err)
	}
	d := devs[1]
	if d.Name != "numa-1" || intOf(t, d, devices.AttrNUMANodeID) != 1 || intOf(t, d, devices.AttrNumCPUs) != 15 ||
		intOf(t, d, devices.AttrSocketID) != 1 {
		t.Errorf("numa-1 attributes %v", d.Attributes)
	}
	c := d.Capacity["d.example/cpu"]
	if c.Value.Value() != 15 || d.AllowMultipleAllocations == nil || !*d.AllowMultipleAllocations ||
		c.RequestPolicy == nil || c.RequestPolicy.ValidRange.Min.Value() != 1 {
		t.Errorf("numa-1 capacity %+v, allowMultiple %v: want 15 shareable CPUs, min 1", c, d.AllowMultipleAllocations)
	}
}

func TestSlicesHoldAtMost128Devices(t *testing.T) {
	m := fixture.Machine(t, "smt4-2s")
	devs, _ := devices.List(m, "d.example", cpuset.New(), devices.Individual, mutant.None)
	res := devices.Resources("node-a", append(append(devs, devs...), devs...)) // 192 devices
	slices := res.Pools["node-a"].Slices
	if len(slices) != 2 || len(slices[0].Devices) != 128 || len(slices[1].Devices) != 64 {
		t.Errorf("slices %d (%d, ...), want 128 + 64", len(slices), len(slices[0].Devices))
	}
}

func TestUnknownModeIsAnError(t *testing.T) {
	if _, err := devices.List(fixture.Machine(t, "laptop-1s4c-smt2"), "d.example", cpuset.New(), "bogus", mutant.None); err == nil {
		t.Error("mode bogus accepted")
	}
}

func TestMutantSplitsCoresOrdersByThread(t *testing.T) {
	m := fixture.Machine(t, "laptop-1s4c-smt2")
	order := devices.Order(m, m.Online, mutant.SplitsCores)
	if m.CPUs[order[0]].Siblings.Equals(m.CPUs[order[1]].Siblings) {
		t.Errorf("mutant order %v still starts with one whole core", order)
	}
}

func TestMutantWrongNUMAAttribute(t *testing.T) {
	m := fixture.Machine(t, "server-2s8c-smt2-intel")
	d := devices.CPUDevice(m, 8, mutant.WrongNUMAAttribute)
	if intOf(t, d, devices.AttrNUMANodeID) == m.CPUs[8].Node || intOf(t, d, devices.AttrStandardNUMA) == m.CPUs[8].Node {
		t.Error("the mutant publishes the right NUMA node")
	}
}
