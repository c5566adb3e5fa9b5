// Package checkpoint keeps the driver's grants in one file, written atomically and checked on load.
package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// Version is the file format's version; a file of another version is refused, never guessed at.
const Version = 1

// FileName is the checkpoint's name inside the state directory.
const FileName = "checkpoint.json"

// Device is one allocated device of a claim, as the allocation result named it.
type Device struct {
	Request string `json:"request"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
	ShareID string `json:"shareID,omitempty"`
}

// Claim is one prepared ResourceClaim and the CPUs it holds.
type Claim struct {
	UID       string   `json:"uid"`
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	CPUs      string   `json:"cpus"` // Linux cpulist
	Pods      []string `json:"pods,omitempty"`
	Devices   []Device `json:"devices"`
}

// File is the checkpoint's content: the claims and a checksum over them.
type File struct {
	Version  int     `json:"version"`
	Driver   string  `json:"driver"`
	Claims   []Claim `json:"claims"`
	Checksum string  `json:"checksum"`
}

// Store reads and writes the checkpoint of one driver in one directory.
type Store struct {
	Dir    string
	Driver string
}

// Path is where the checkpoint lives.
func (s Store) Path() string { return filepath.Join(s.Dir, FileName) }

func checksum(claims []Claim) (string, error) {
	data, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// Save writes claims (sorted by UID) to a temporary file, syncs it, renames it over the checkpoint and
// syncs the directory: a crash leaves the old file or the new one, never a torn one.
func (s Store) Save(claims []Claim) error {
	sorted := append([]Claim(nil), claims...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].UID < sorted[j].UID })
	if sorted == nil {
		sorted = []Claim{}
	}
	sum, err := checksum(sorted)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(File{Version: Version, Driver: s.Driver, Claims: sorted, Checksum: sum}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.Dir, 0o750); err != nil {
		return fmt.Errorf("state dir %s: %w", s.Dir, err)
	}
	tmp, err := os.CreateTemp(s.Dir, FileName+".tmp-*")
	if err != nil {
		return fmt.Errorf("checkpoint in %s: %w", s.Dir, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), s.Path()); err != nil {
		return fmt.Errorf("replace %s: %w", s.Path(), err)
	}
	dir, err := os.Open(s.Dir)
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}

// ErrCorrupt marks a checkpoint that exists but cannot be trusted.
var ErrCorrupt = errors.New("corrupt checkpoint")

// Load reads the checkpoint; no file is an empty state (first start). A file that does not parse, has
// another version or driver, or fails its checksum is an error naming the file: the driver must not
// start with grants it cannot account for, or it would hand their CPUs out again.
func (s Store) Load() ([]Claim, error) {
	data, err := os.ReadFile(s.Path())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", s.Path(), err)
	}
	fix := "drain the node's claimed pods, then delete the file and restart the driver"
	var f File
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%w %s: not JSON (%v); %s", ErrCorrupt, s.Path(), err, fix)
	}
	if f.Version != Version {
		return nil, fmt.Errorf("%w %s: version %d, this driver reads version %d; %s", ErrCorrupt, s.Path(),
			f.Version, Version, fix)
	}
	if f.Driver != s.Driver {
		return nil, fmt.Errorf("%w %s: written by driver %q, this is %q; %s", ErrCorrupt, s.Path(), f.Driver,
			s.Driver, fix)
	}
	claims := f.Claims
	if claims == nil {
		claims = []Claim{}
	}
	sum, err := checksum(claims)
	if err != nil || sum != f.Checksum {
		return nil, fmt.Errorf("%w %s: checksum %q does not match its claims (%s); %s", ErrCorrupt, s.Path(),
			f.Checksum, sum, fix)
	}
	return claims, nil
}
