// Package kubeletstate reads the kubelet's CPU manager checkpoint (cpu_manager_state): which CPUs its
// static policy pinned to which container. The driver must not hand those CPUs out again.
package kubeletstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"sync"

	"k8s.io/klog/v2"
	"k8s.io/utils/cpuset"
)

// RelPath is where the kubelet keeps the checkpoint below the node's root (its --root-dir default).
const RelPath = "var/lib/kubelet/cpu_manager_state"

// Key is one container as the kubelet names it in the checkpoint: its pod's UID and its name in the pod spec.
type Key struct {
	PodUID, Container string
}

// State is what the checkpoint says. The zero value is "nothing pinned".
type State struct {
	Policy  string                // policyName: "static" or "none"; "" when the file does not exist
	Default cpuset.CPUSet         // defaultCpuSet: the kubelet's own shared pool (kept for the logs)
	Pinned  map[Key]cpuset.CPUSet // entries: the exclusive CPUs of each container the static policy pinned
}

// All is the union of every pinned container's CPUs.
func (s State) All() cpuset.CPUSet {
	out := cpuset.New()
	for _, cpus := range s.Pinned {
		out = out.Union(cpus)
	}
	return out
}

// Has says whether the kubelet pinned this container.
func (s State) Has(podUID, container string) bool {
	_, ok := s.Pinned[Key{podUID, container}]
	return ok
}

// Owners names the pinned containers holding any of cpus ("pod <uid> container <name> (CPUs x)"), sorted.
func (s State) Owners(cpus cpuset.CPUSet) string {
	var out []string
	for k, pinned := range s.Pinned {
		if both := pinned.Intersection(cpus); !both.IsEmpty() {
			out = append(out, fmt.Sprintf("pod %s container %s (CPUs %s)", k.PodUID, k.Container, both))
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// SamePins says whether two states pin the same CPUs to the same containers (the policy name and the
// default set follow from the pins, so they are not compared).
func (s State) SamePins(o State) bool {
	if len(s.Pinned) != len(o.Pinned) {
		return false
	}
	for k, cpus := range s.Pinned {
		if other, ok := o.Pinned[k]; !ok || !other.Equals(cpus) {
			return false
		}
	}
	return true
}

// file is the checkpoint's JSON (the kubelet's v2 format, written since Kubernetes 1.18):
// {"policyName":"static","defaultCpuSet":"0-1,4-7","entries":{"<pod uid>":{"<container>":"2-3"}},"checksum":N}.
// The kubelet omits entries when nothing is pinned. The v1 format (entries keyed by container ID) is
// migrated by the kubelet at its start, so it is refused here as unreadable.
//
// The checksum is not verified, on purpose: the kubelet computes it as FNV-1a over a go-spew rendering
// of its internal Go type (type names included, already renamed once for the v1 migration), an
// implementation detail a future kubelet may change; a driver that checked it would then refuse every
// claim on a healthy node. What it guards against cannot happen on a read: the kubelet writes the
// file to a temporary one and renames it (its checkpoint manager's file store), so a reader sees the
// old or the new content whole; and the kubelet itself refuses to start on a bad checksum. The
// structure is checked instead: an object with a policy name and CPU lists that parse.
type file struct {
	PolicyName    *string                      `json:"policyName"`
	DefaultCPUSet string                       `json:"defaultCpuSet"`
	Entries       map[string]map[string]string `json:"entries"`
	Checksum      json.RawMessage              `json:"checksum"`
}

// Parse reads the checkpoint's content.
func Parse(data []byte) (State, error) {
	var f file
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&f); err != nil {
		return State{}, fmt.Errorf("not the kubelet's v2 CPU manager checkpoint: %v", err)
	}
	if dec.More() {
		return State{}, errors.New("not the kubelet's v2 CPU manager checkpoint: data after the JSON object")
	}
	if f.PolicyName == nil || *f.PolicyName == "" {
		return State{}, errors.New("no policyName")
	}
	s := State{Policy: *f.PolicyName, Pinned: map[Key]cpuset.CPUSet{}}
	var err error
	if s.Default, err = cpuset.Parse(f.DefaultCPUSet); err != nil {
		return State{}, fmt.Errorf("defaultCpuSet %q is not a CPU list: %v", f.DefaultCPUSet, err)
	}
	for pod, containers := range f.Entries {
		for name, list := range containers {
			cpus, err := cpuset.Parse(list)
			if err != nil {
				return State{}, fmt.Errorf("entries[%s][%s] = %q is not a CPU list: %v", pod, name, list, err)
			}
			if !cpus.IsEmpty() {
				s.Pinned[Key{pod, name}] = cpus
			}
		}
	}
	return s, nil
}

// File is the checkpoint on the node, read afresh on every Read (it is small). It remembers the last
// content that parsed, so that a bad read never turns into "nothing pinned".
type File struct {
	Path string

	mu      sync.Mutex
	good    State
	lastErr string // the error last logged, so an unreadable file is logged once, not on every read
}

// Read returns what the kubelet pinned now. A missing file is "nothing pinned": the kubelet has not
// written its state yet, or the node has none (policy none writes an empty one). An unreadable or
// unparseable file returns the last good state with an error naming the file: callers that hand CPUs
// out must refuse (fail closed); callers that place containers keep using the last good pins.
func (f *File) Read() (State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	data, err := os.ReadFile(f.Path)
	var s State
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// s stays the zero State: nothing pinned
	case err != nil:
		return f.failed(fmt.Errorf("kubelet CPU manager state %s: %w", f.Path, err))
	default:
		if s, err = Parse(data); err != nil {
			return f.failed(fmt.Errorf("kubelet CPU manager state %s: %w", f.Path, err))
		}
	}
	if f.lastErr != "" {
		klog.InfoS("kubelet CPU manager state readable again", "file", f.Path, "policy", s.Policy,
			"pinned", s.All().String())
		f.lastErr = ""
	}
	f.good = s
	return s, nil
}

func (f *File) failed(err error) (State, error) {
	if err.Error() != f.lastErr {
		klog.ErrorS(err, "kubelet CPU manager state unreadable: keeping its last good pins, refusing claims until it reads",
			"lastGoodPinned", f.good.All().String())
		f.lastErr = err.Error()
	}
	return f.good, err
}
