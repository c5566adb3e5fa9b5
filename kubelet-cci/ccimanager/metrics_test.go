package ccimanager

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/component-base/metrics"
)

var (
	testRegistry     metrics.KubeRegistry
	testRegistryOnce sync.Once
)

// histogram returns the sample count and sum of one labelled series of a CCI histogram. The collectors are
// registered once, in a registry of the test's own: component-base metrics record nothing until registered.
func histogram(t *testing.T, name string, labels map[string]string) (uint64, float64) {
	t.Helper()
	testRegistryOnce.Do(func() {
		testRegistry = metrics.NewKubeRegistry()
		testRegistry.MustRegister(Metrics()...)
	})
	families, err := testRegistry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, family := range families {
		if family.GetName() != name {
			continue
		}
	series:
		for _, m := range family.GetMetric() {
			for _, pair := range m.GetLabel() {
				if want, ok := labels[pair.GetName()]; ok && want != pair.GetValue() {
					continue series
				}
			}
			return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
		}
	}
	return 0, 0
}

// The kind backend judges a driver's latency by CCIAdmit + CCIAddContainerResource, as the embedded node
// times it: a driver slow to answer Add must show in the kubelet's Add histogram (issue 26, item 1).
func TestAddContainerResourceIsTimedByDriverAndOutcome(t *testing.T) {
	r := newRig(t, time.Second)
	histogram(t, "", nil) // register before the first observation
	added := map[string]string{"driver": "drv", "outcome": "added"}
	count0, sum0 := histogram(t, "kubelet_cci_add_container_duration_seconds", added)
	admits0, _ := histogram(t, "kubelet_cci_admit_duration_seconds", map[string]string{"driver": "drv"})
	r.drv.addDelay = 40 * time.Millisecond
	ctx := context.Background()
	if _, err := r.m.Admit(ctx, request("p1", "c", `{"cpu attributes":[["EXCLUSIVE"]],"cores":["2"]}`)); err != nil {
		t.Fatal(err)
	}
	if err := r.m.ContainerCreated(ctx, "p1", "c", "cid-1", "/kubepods/pod-p1/cid-1"); err != nil {
		t.Fatal(err)
	}
	count, sum := histogram(t, "kubelet_cci_add_container_duration_seconds", added)
	if count != count0+1 {
		t.Fatalf("Add samples %d -> %d, want one more", count0, count)
	}
	if grew := sum - sum0; grew < 0.040 || grew > 0.9 {
		t.Errorf("Add histogram grew by %.3f s for a 40 ms Add", grew)
	}
	if admits, _ := histogram(t, "kubelet_cci_admit_duration_seconds", map[string]string{"driver": "drv"}); admits != admits0+1 {
		t.Errorf("CCIAdmit samples %d -> %d: the Add must not be counted as an admit", admits0, admits)
	}
	// a container without a grant sends no Add and records none
	if err := r.m.ContainerCreated(ctx, "other", "c", "cid-2", "/x"); err != nil {
		t.Fatal(err)
	}
	if again, _ := histogram(t, "kubelet_cci_add_container_duration_seconds", added); again != count {
		t.Errorf("a container without a grant was timed as an Add (%d -> %d)", count, again)
	}
}

// An Add the driver does not answer in time is timed too, under the rejection's reason.
func TestAddContainerResourceTimeoutIsTimedUnderItsReason(t *testing.T) {
	r := newRig(t, 100*time.Millisecond)
	timedOut := map[string]string{"driver": "drv", "outcome": ReasonDriverTimeout}
	count0, _ := histogram(t, "kubelet_cci_add_container_duration_seconds", timedOut)
	r.drv.addDelay = time.Second
	ctx := context.Background()
	if _, err := r.m.Admit(ctx, request("p1", "c", `{"cpu attributes":[["EXCLUSIVE"]],"cores":["2"]}`)); err != nil {
		t.Fatal(err)
	}
	rejection(t, r.m.ContainerCreated(ctx, "p1", "c", "cid-1", "/x"), ReasonDriverTimeout)
	if count, sum := histogram(t, "kubelet_cci_add_container_duration_seconds", timedOut); count != count0+1 || sum < 0.1 {
		t.Errorf("a timed-out Add: samples %d -> %d, sum %.3f s", count0, count, sum)
	}
}
