// Package kubeplugin is the driver's DRA kubelet plugin: it prepares and unprepares claims on the engine.
package kubeplugin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	"k8s.io/utils/cpuset"

	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/cdi"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/checkpoint"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/devices"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/mutant"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/pinning"
)

// SlowPrepareDelay is what the SlowPrepare mutant adds to every preparation: over the profile's
// 100 ms budget per NodePrepareResources call.
const SlowPrepareDelay = 250 * time.Millisecond

// Plugin implements kubeletplugin.DRAPlugin.
type Plugin struct {
	Engine     *pinning.Engine
	DriverName string
	CDIDir     string
	Mutant     mutant.Name
	// Fatal is called for background errors that retrying cannot fix; it should stop the driver.
	Fatal func(error)
	stale atomic.Bool // StaleUnprepares mutant: unprepares are ignored until the next prepare
}

// KubeletRegisteredAgain is told of every registration of the driver by the kubelet after the first
// (a kubelet restart). A correct driver has nothing to do: its grants and the kubelet's claims survive.
func (p *Plugin) KubeletRegisteredAgain() {
	switch p.Mutant {
	case mutant.ResetsOnKubeletRestart:
		p.Engine.ForgetGrants()
	case mutant.StaleUnprepares:
		p.stale.Store(true)
	}
}

var _ kubeletplugin.DRAPlugin = &Plugin{}

// PrepareResourceClaims grants each claim its CPUs and writes the CDI spec that names the claim in its
// containers. One claim's refusal does not fail the others (each has its own result).
func (p *Plugin) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	if p.Mutant == mutant.SlowPrepare {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(SlowPrepareDelay):
		}
	}
	p.stale.Store(false)
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		out[claim.UID] = p.prepare(claim)
		if err := out[claim.UID].Err; err != nil {
			klog.FromContext(ctx).Error(err, "claim refused", "claim", klog.KObj(claim))
		}
	}
	return out, nil
}

func (p *Plugin) prepare(claim *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	req, results, err := p.Request(claim)
	if err != nil {
		return kubeletplugin.PrepareResult{Err: err}
	}
	cpus, err := p.Engine.Grant(req)
	if err != nil {
		return kubeletplugin.PrepareResult{Err: err}
	}
	if err := cdi.Write(p.CDIDir, p.DriverName, string(claim.UID), cpus.String()); err != nil {
		if rerr := p.Engine.Release(string(claim.UID)); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s: CDI spec: %w", claim.Namespace, claim.Name, err)}
	}
	var devs []kubeletplugin.Device
	for _, r := range results {
		devs = append(devs, kubeletplugin.Device{Requests: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device,
			CDIDeviceIDs: []string{cdi.DeviceID(p.DriverName, string(claim.UID))}, ShareID: r.ShareID})
	}
	return kubeletplugin.PrepareResult{Devices: devs}
}

// Request reads what a claim's allocation asks of this driver: the CPUs of its individual devices, or
// the consumed capacity of its group devices; and the pods it is reserved for.
func (p *Plugin) Request(claim *resourceapi.ResourceClaim) (pinning.Request, []resourceapi.DeviceRequestAllocationResult, error) {
	who := fmt.Sprintf("claim %s/%s", claim.Namespace, claim.Name)
	req := pinning.Request{UID: string(claim.UID), Namespace: claim.Namespace, Name: claim.Name, CPUs: cpuset.New()}
	if claim.Status.Allocation == nil {
		return req, nil, fmt.Errorf("%s is not allocated", who)
	}
	for i, cfg := range claim.Status.Allocation.Devices.Config {
		if cfg.Opaque != nil && cfg.Opaque.Driver == p.DriverName && p.Mutant != mutant.IgnoresOpaqueConfig {
			return req, nil, fmt.Errorf("%s: status.allocation.devices.config[%d].opaque.parameters: this driver "+
				"takes no parameters (the CPU count is the number of devices, or the consumed %q capacity); "+
				"remove the opaque config of driver %s", who, i, devices.CapacityName(p.DriverName), p.DriverName)
		}
	}
	for _, ref := range claim.Status.ReservedFor {
		if ref.Resource == "pods" && ref.APIGroup == "" {
			req.Pods = append(req.Pods, string(ref.UID))
		}
	}
	var ours []resourceapi.DeviceRequestAllocationResult
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != p.DriverName {
			continue
		}
		ours = append(ours, r)
		dev := checkpoint.Device{Request: r.Request, Pool: r.Pool, Device: r.Device}
		if r.ShareID != nil {
			dev.ShareID = string(*r.ShareID)
		}
		req.Devices = append(req.Devices, dev)
		if id, ok := strings.CutPrefix(r.Device, "cpu-"); ok {
			cpu, err := strconv.Atoi(id)
			if err != nil {
				return req, nil, fmt.Errorf("%s: device %q is not one of this driver's", who, r.Device)
			}
			req.CPUs = req.CPUs.Union(cpuset.New(cpu))
			continue
		}
		node, err := strconv.Atoi(strings.TrimPrefix(r.Device, "numa-"))
		if !strings.HasPrefix(r.Device, "numa-") || err != nil {
			return req, nil, fmt.Errorf("%s: device %q is not one of this driver's", who, r.Device)
		}
		count, ok := consumed(r.ConsumedCapacity, p.DriverName)
		if !ok {
			return req, nil, fmt.Errorf("%s: group device %s was allocated without a consumed %q capacity: the "+
				"DRAConsumableCapacity feature gate must be on in the API server, scheduler and kubelet", who,
				r.Device, devices.CapacityName(p.DriverName))
		}
		req.Shares = append(req.Shares, pinning.Share{Node: node, Count: count})
	}
	if len(ours) == 0 {
		return req, nil, fmt.Errorf("%s: its allocation has no device of driver %s", who, p.DriverName)
	}
	return req, ours, nil
}

func consumed(capacity map[resourceapi.QualifiedName]apiresource.Quantity, driver string) (int, bool) {
	// The key is the device's (qualified); an unqualified one is the driver's own domain too.
	for _, key := range []resourceapi.QualifiedName{devices.CapacityName(driver), devices.CapacityCPU} {
		if q, ok := capacity[key]; ok {
			return int(q.Value()), true
		}
	}
	return 0, false
}

// UnprepareResourceClaims releases each claim's CPUs and deletes its CDI spec; unknown claims are fine.
func (p *Plugin) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := make(map[types.UID]error, len(claims))
	if p.stale.Load() {
		for _, c := range claims {
			klog.FromContext(ctx).Info("unprepare taken for a replay after a kubelet restart: nothing released", "claim", c.UID)
			out[c.UID] = nil
		}
		return out, nil
	}
	for _, c := range claims {
		err := p.Engine.Release(string(c.UID))
		if err == nil {
			err = cdi.Remove(p.CDIDir, p.DriverName, string(c.UID))
		}
		out[c.UID] = err
	}
	return out, nil
}

// HandleError logs background errors (ResourceSlice publication); fatal ones stop the driver.
func (p *Plugin) HandleError(ctx context.Context, err error, msg string) {
	runtime.HandleErrorWithContext(ctx, err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) && p.Fatal != nil {
		p.Fatal(fmt.Errorf("%s: %w", msg, err))
	}
}

// WatchHealthStatus: CPUs have no health to report (the helper's health service is off).
func (p *Plugin) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}
