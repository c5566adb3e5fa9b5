// Package nriplugin is the driver's NRI plugin: it sets each container's cpuset from the pinning engine.
package nriplugin

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"k8s.io/klog/v2"
	"k8s.io/utils/cpuset"

	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/cdi"
	"github.com/cci-conformance/cci-conformance/drivers_under_test/dra-reference/internal/pinning"
)

// Plugin adapts NRI events to the engine.
type Plugin struct {
	Engine     *pinning.Engine
	DriverName string
	// Dial connects to the runtime's socket; nil is NRI's default (tests wrap it to cut connections).
	Dial      func(socket string) (net.Conn, error)
	connected atomic.Bool
}

// Connected says whether the runtime holds a connection to the plugin now.
func (p *Plugin) Connected() bool { return p.connected.Load() }

// ContainerOf reads what the engine needs of an NRI container: its pod, its claims (from the CDI
// environment variables or, where the runtime passes them, its CDI device names) and its cpuset now.
func ContainerOf(driverName string, pod *api.PodSandbox, ctr *api.Container) pinning.Container {
	claims := cdi.ClaimsFromEnv(ctr.GetEnv())
	if len(claims) == 0 {
		var names []string
		for _, d := range ctr.GetCDIDevices() {
			names = append(names, d.GetName())
		}
		claims = cdi.ClaimsFromDevices(driverName, names)
	}
	current := cpuset.New()
	if s := ctr.GetLinux().GetResources().GetCpu().GetCpus(); s != "" {
		if parsed, err := cpuset.Parse(s); err == nil {
			current = parsed
		}
	}
	// The runtime's container name is the pod spec's (the CRI metadata name): with the pod's UID it
	// is how the kubelet's CPU manager checkpoint names the container.
	return pinning.Container{ID: ctr.GetId(), PodUID: pod.GetUid(), Claims: claims, CPUs: current,
		ContainerName: ctr.GetName(), Name: pod.GetNamespace() + "/" + pod.GetName() + "/" + ctr.GetName()}
}

// ToNRI turns engine updates into NRI container updates.
func ToNRI(updates []pinning.Update) []*api.ContainerUpdate {
	out := make([]*api.ContainerUpdate, 0, len(updates))
	for _, u := range updates {
		upd := &api.ContainerUpdate{ContainerId: u.ContainerID}
		upd.SetLinuxCPUSetCPUs(u.CPUs.String())
		// A container that exits while the update is on its way must not fail the others.
		upd.SetIgnoreFailure()
		out = append(out, upd)
	}
	return out
}

// Synchronize is called on every (re)connect with every pod and container the runtime has.
func (p *Plugin) Synchronize(_ context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	byID := map[string]*api.PodSandbox{}
	for _, pod := range pods {
		byID[pod.GetId()] = pod
	}
	var running []pinning.Container
	for _, c := range ctrs {
		if c.GetState() == api.ContainerState_CONTAINER_STOPPED {
			continue
		}
		running = append(running, ContainerOf(p.DriverName, byID[c.GetPodSandboxId()], c))
	}
	updates := p.Engine.Synchronize(running)
	klog.InfoS("synchronized with the runtime", "containers", len(running), "updates", len(updates),
		"sharedPool", p.Engine.SharedPool().String())
	return ToNRI(updates), nil
}

// CreateContainer pins a new container and moves any other container whose cpuset is stale.
func (p *Plugin) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	c := ContainerOf(p.DriverName, pod, ctr)
	cpus, updates, err := p.Engine.Create(c)
	if err != nil {
		klog.ErrorS(err, "refusing container", "container", c.Name)
		return nil, nil, err
	}
	adjust := &api.ContainerAdjustment{}
	if cpus.IsEmpty() {
		// The engine's "leave it": pinned by the kubelet's static policy, which set the cpuset in the
		// create request. Not claiming the cpuset keeps the kubelet's.
		klog.V(2).InfoS("container left as the kubelet set it", "container", c.Name)
		return adjust, ToNRI(updates), nil
	}
	adjust.SetLinuxCPUSetCPUs(cpus.String())
	klog.V(2).InfoS("pinned container", "container", c.Name, "claims", c.Claims, "cpus", cpus.String())
	return adjust, ToNRI(updates), nil
}

// StopContainer forgets the container; its claim's CPUs stay granted until the claim is unprepared.
func (p *Plugin) StopContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container) ([]*api.ContainerUpdate, error) {
	return ToNRI(p.Engine.Stop(ctr.GetId())), nil
}

// RemoveContainer forgets the container (a stop may never have been seen, e.g. after a reconnect).
func (p *Plugin) RemoveContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container) error {
	p.Engine.Stop(ctr.GetId())
	return nil
}

// Run connects to the runtime's NRI socket and serves until ctx ends, reconnecting after a lost
// connection (containerd restarts, or was not up yet); every connect starts with Synchronize.
func (p *Plugin) Run(ctx context.Context, socket, name, index string) {
	backoff := time.Second
	for ctx.Err() == nil {
		opts := []stub.Option{stub.WithPluginName(name), stub.WithPluginIdx(index), stub.WithSocketPath(socket),
			stub.WithOnClose(func() { p.connected.Store(false) })}
		if p.Dial != nil {
			opts = append(opts, stub.WithDialer(p.Dial))
		}
		s, err := stub.New(p, opts...)
		if err == nil {
			p.Engine.SetPusher(func(updates []pinning.Update) error {
				failed, err := s.UpdateContainers(ToNRI(updates))
				if err == nil && len(failed) > 0 {
					err = fmt.Errorf("the runtime failed %d of %d updates", len(failed), len(updates))
				}
				return err
			})
			runCtx, cancel := context.WithCancel(ctx)
			if err = s.Start(runCtx); err == nil {
				p.connected.Store(true)
				backoff = time.Second
				klog.InfoS("connected to the runtime's NRI", "socket", socket)
				go func() { <-runCtx.Done(); s.Stop() }() // shutting down ends the wait below
				s.Wait()
				err = fmt.Errorf("connection closed")
			}
			cancel()
			s.Stop()
			p.Engine.SetPusher(nil)
			p.connected.Store(false)
		}
		klog.ErrorS(err, "NRI plugin not connected; retrying", "socket", socket, "in", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}
