package main

// The driver's own record of its admissions, kept in {state_dir} so a restart, kill -9 included, loses
// no grant (docs/spec.md S1.9). Each change rewrites one JSON file through a temporary file and a rename:
// a kill leaves either the old or the new file, never a torn one. The rename is enough against a killed
// process (the kernel keeps the written pages); fsync, which costs milliseconds on every admission, runs
// in the background shortly after a change, so only a power loss within that window can lose a change.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

const stateFormat = 1

// GroupGrant is one group of a reply (S2.2).
type GroupGrant struct {
	CPUs      string `json:"cpus"`
	Exclusive bool   `json:"exclusive"`
}

// Admission is one admitted (pod, container) (S1.3).
type Admission struct {
	Pod         string       `json:"pod"`
	Container   string       `json:"container"`
	Namespace   string       `json:"namespace"`
	ClaimUID    string       `json:"claim_uid"`
	ClaimName   string       `json:"claim_name"`
	Handle      string       `json:"resource_handle"`
	ContainerID string       `json:"container_id,omitempty"`
	Groups      []GroupGrant `json:"groups"`
	Withheld    string       `json:"withheld,omitempty"` // DENIED siblings (S2.4)
}

type stateFile struct {
	Format     int          `json:"format"`
	Admissions []*Admission `json:"admissions"`
}

// Store holds the admissions by (pod, container).
type Store struct {
	path  string
	byKey map[string]*Admission
	dirty chan struct{} // wakes the background syncer
}

func admissionKey(pod, container string) string { return pod + "\x00" + container }

// OpenStore loads the state file of dir; a missing file is an empty state, an unreadable or corrupt one
// is an error, so the driver refuses to start rather than start empty and grant CPUs twice (S1.9).
func OpenStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state dir %s: %v", dir, err)
	}
	s := &Store{path: filepath.Join(dir, "go-reference-state.json"), byKey: map[string]*Admission{},
		dirty: make(chan struct{}, 1)}
	go s.syncLoop()
	data, err := os.ReadFile(s.path)
	if os.IsNotExist(err) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state file %s: %v", s.path, err)
	}
	var f stateFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("state file %s is corrupt (%v); refusing to start: remove it only if no "+
			"container of this node holds CPUs from this driver", s.path, err)
	}
	if f.Format != stateFormat {
		return nil, fmt.Errorf("state file %s has format %d, this driver reads %d", s.path, f.Format, stateFormat)
	}
	for i, a := range f.Admissions {
		if a == nil || a.Pod == "" || a.Container == "" || a.ClaimUID == "" || len(a.Groups) == 0 {
			return nil, fmt.Errorf("state file %s: admission %d is incomplete; refusing to start", s.path, i)
		}
		for _, g := range a.Groups {
			if _, err := ParseCPUList(g.CPUs); err != nil {
				return nil, fmt.Errorf("state file %s: admission %d: %v; refusing to start", s.path, i, err)
			}
		}
		s.byKey[admissionKey(a.Pod, a.Container)] = a
	}
	return s, nil
}

// Sorted gives the admissions in a stable order.
func (s *Store) Sorted() []*Admission {
	out := make([]*Admission, 0, len(s.byKey))
	for _, a := range s.byKey {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool {
		return admissionKey(out[i].Pod, out[i].Container) < admissionKey(out[j].Pod, out[j].Container)
	})
	return out
}

// Commit replaces the admissions with next and makes them durable before it returns; on failure the
// in-memory state is unchanged, so a refused call leaves no trace (S1.6).
func (s *Store) Commit(next map[string]*Admission) error {
	old := s.byKey
	s.byKey = next
	list := s.Sorted()
	s.byKey = old
	data, err := json.Marshal(stateFile{Format: stateFormat, Admissions: list})
	if err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("writing state: %v", err)
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr != nil || cerr != nil {
		return fmt.Errorf("writing state %s: %v %v", tmp, werr, cerr)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("writing state: %v", err)
	}
	s.byKey = next
	select { // one pending wake-up is enough: the syncer flushes whatever file is current
	case s.dirty <- struct{}{}:
	default:
	}
	return nil
}

// syncLoop flushes the current state file and its directory after changes, off the call path.
func (s *Store) syncLoop() {
	for range s.dirty {
		for _, p := range []string{s.path, filepath.Dir(s.path)} {
			if f, err := os.Open(p); err == nil {
				_ = f.Sync()
				_ = f.Close()
			}
		}
	}
}

// Copy gives a map that can be changed and then committed.
func (s *Store) Copy() map[string]*Admission {
	out := make(map[string]*Admission, len(s.byKey))
	for k, v := range s.byKey {
		out[k] = v
	}
	return out
}

// Withheld is every CPU the driver keeps from others: exclusive groups and DENIED siblings (S2.9).
func (s *Store) Withheld() CPUSet {
	var out CPUSet
	for _, a := range s.byKey {
		for _, g := range a.Groups {
			if g.Exclusive {
				set, _ := ParseCPUList(g.CPUs)
				out = out.Union(set)
			}
		}
		w, _ := ParseCPUList(a.Withheld)
		out = out.Union(w)
	}
	return out
}
