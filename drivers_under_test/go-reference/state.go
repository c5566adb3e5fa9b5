package main

// The driver's own record of its admissions, kept in {state_dir} so a restart, kill -9 included, loses
// no grant (docs/spec.md S1.9). The record is an append-only log, one CRC-checked line per change,
// written before the change is acknowledged. Appending keeps a change O(1) and cheap: rewriting and
// renaming a whole file costs more than a millisecond per admission on ext4 (it forces a data flush).
// A killed process loses nothing the kernel already holds, so fsync (milliseconds) runs in the
// background shortly after a change; only a power loss within that window can lose a change.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

const (
	stateName       = "go-reference-state.log"
	compactMinBytes = 256 << 10 // rewrite the log once it is this large and 4x its live content
)

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

// change is one log line: admissions set (added or replaced) and removed by (pod, container).
type change struct {
	Set []*Admission `json:"set,omitempty"`
	Del [][2]string  `json:"del,omitempty"`
}

// Store holds the admissions by (pod, container).
type Store struct {
	path  string
	log   *os.File
	size  int64
	byKey map[string]*Admission
	dirty chan struct{} // wakes the background syncer
}

func admissionKey(pod, container string) string { return pod + "\x00" + container }

func encodeLine(c change) ([]byte, error) {
	body, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return []byte(fmt.Sprintf("%08x %s\n", crc32.ChecksumIEEE(body), body)), nil
}

// OpenStore replays the log of dir. A missing log is an empty state; a torn last line (a kill during the
// write, never acknowledged) is dropped; any other damage refuses the start, rather than start empty and
// grant CPUs twice (S1.9).
func OpenStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state dir %s: %v", dir, err)
	}
	s := &Store{path: filepath.Join(dir, stateName), byKey: map[string]*Admission{}, dirty: make(chan struct{}, 1)}
	data, err := os.ReadFile(s.path)
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("state file %s: %v", s.path, err)
	}
	lines := bytes.Split(data, []byte("\n"))
	torn := len(lines[len(lines)-1]) > 0 // the last line has no newline: it was being written
	for i, line := range lines[:len(lines)-1] {
		if err := s.apply(line); err != nil {
			return nil, fmt.Errorf("state file %s line %d is corrupt (%v); refusing to start: remove the file only "+
				"if no container of this node holds CPUs from this driver", s.path, i+1, err)
		}
	}
	if err := s.rewrite(); err != nil { // a fresh, compact log without the torn tail
		return nil, err
	}
	if torn {
		fmt.Fprintf(os.Stderr, "go-reference: dropped a torn last line of %s (a change never acknowledged)\n", s.path)
	}
	go s.syncLoop()
	return s, nil
}

func (s *Store) apply(line []byte) error {
	crcText, body, ok := bytes.Cut(line, []byte(" "))
	want, err := strconv.ParseUint(string(crcText), 16, 32)
	if !ok || err != nil || len(crcText) != 8 {
		return fmt.Errorf("no CRC")
	}
	if uint32(want) != crc32.ChecksumIEEE(body) {
		return fmt.Errorf("CRC mismatch")
	}
	var c change
	if err := json.Unmarshal(body, &c); err != nil {
		return err
	}
	for _, k := range c.Del {
		delete(s.byKey, admissionKey(k[0], k[1]))
	}
	for _, a := range c.Set {
		if a == nil || a.Pod == "" || a.Container == "" || a.ClaimUID == "" || len(a.Groups) == 0 {
			return fmt.Errorf("incomplete admission")
		}
		for _, g := range a.Groups {
			if _, err := ParseCPUList(g.CPUs); err != nil {
				return err
			}
		}
		s.byKey[admissionKey(a.Pod, a.Container)] = a
	}
	return nil
}

// rewrite replaces the log with one line holding every live admission.
func (s *Store) rewrite() error {
	line, err := encodeLine(change{Set: s.Sorted()})
	if err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, line, 0o644); err != nil {
		return fmt.Errorf("writing state: %v", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("writing state: %v", err)
	}
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening state: %v", err)
	}
	if s.log != nil {
		_ = s.log.Close()
	}
	s.log, s.size = f, int64(len(line))
	return nil
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

// Commit replaces the admissions with next once the change is in the log; on failure the in-memory
// state is unchanged, so a refused call leaves no trace (S1.6).
func (s *Store) Commit(next map[string]*Admission) error {
	var c change
	for k, a := range next {
		if s.byKey[k] != a {
			c.Set = append(c.Set, a)
		}
	}
	for k, a := range s.byKey {
		if _, ok := next[k]; !ok {
			c.Del = append(c.Del, [2]string{a.Pod, a.Container})
		}
	}
	line, err := encodeLine(c)
	if err != nil {
		return err
	}
	if _, err := s.log.Write(line); err != nil {
		return fmt.Errorf("writing state %s: %v", s.path, err)
	}
	s.size += int64(len(line))
	s.byKey = next
	if s.size > compactMinBytes && s.size > 4*int64(approxSize(next)) {
		if err := s.rewrite(); err != nil {
			return err // the change itself is logged; the old log stays valid
		}
	}
	select { // one pending wake-up is enough: the syncer flushes whatever log is current
	case s.dirty <- struct{}{}:
	default:
	}
	return nil
}

func approxSize(m map[string]*Admission) int { return 256 * (len(m) + 1) }

// syncLoop flushes the log and its directory after changes, off the call path.
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
