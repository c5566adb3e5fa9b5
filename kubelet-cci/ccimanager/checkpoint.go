package ccimanager

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/utils/cpuset"
)

// CheckpointName is the file the kubelet's checkpoint manager keeps under its root dir, next to
// cpu_manager_state and dra_manager_state (KEP-3675: "the CCI manager checkpoints its state so a
// restarted kubelet knows which resources drivers hold").
const (
	CheckpointName = "cci_manager_state"
	checkpointKind = "CCICheckpoint"
	checkpointAPI  = "checkpoint.cci.cci-conformance.io/v1"
)

// Record is one CCI container as the manager knows it; the JSON keys are the embedded node's
// (store.py Record.to_json), so cci_manager_state of both nodes compares field by field.
type Record struct {
	PodUID      string        `json:"podUID"`
	Container   string        `json:"container"`
	Namespace   string        `json:"namespace"`
	PodName     string        `json:"podName"`
	ContainerID string        `json:"containerID"`
	Source      string        `json:"source"`
	Exclusive   string        `json:"exclusive"`
	Withheld    string        `json:"withheld"`
	Shared      string        `json:"shared"`
	Groups      []GroupRecord `json:"groups"`
	ClaimUID    string        `json:"claimUID"`
	ClaimName   string        `json:"claimName"`
	Driver      string        `json:"driver"`
	Running     bool          `json:"running"`
}

// GroupRecord is one group of a record.
type GroupRecord struct {
	CPUSet    string `json:"cpuset"`
	Exclusive bool   `json:"exclusive"`
}

// Owed is a CCIRemoveContainerResource the kubelet still owes a driver (an admission it rolled back or a
// container it removed); it stays in the checkpoint until the driver acknowledged it, so a kubelet
// killed in between sends it after the restart (docs/spec.md §3.5).
type Owed struct {
	Driver      string `json:"driver"`
	Namespace   string `json:"namespace"`
	ClaimUID    string `json:"claimUID"`
	ClaimName   string `json:"claimName"`
	ContainerID string `json:"containerID"`
	PodUID      string `json:"podUID"`
	Container   string `json:"container"`
	Why         string `json:"why"` // admission | removal | gone-while-down | add-unconfirmed (the embedded node's words)
}

// StateData is the Data of cci_manager_state.
type StateData struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Mode       string   `json:"mode"`
	Containers []Record `json:"containers"`
	Pending    []Owed   `json:"pending"`
}

// Checkpoint is cci_manager_state in the format of dra_manager_state: {"Data": "<canonical JSON>",
// "Checksum": CRC-32 of Data}. It satisfies the kubelet's checkpointmanager.Checkpoint interface, so the
// kubelet's own file store writes it atomically (temp file, fsync, rename).
type Checkpoint struct {
	Data     StateData
	dataText string
	checksum uint32
	path     string // for the restore advice only
}

// NewCheckpoint wraps state for writing; path names the file in restore errors.
func NewCheckpoint(path string, data StateData) *Checkpoint {
	return &Checkpoint{Data: data, path: path}
}

func (s *StateData) canonical() (string, error) {
	// Canonical JSON (sorted keys, no spaces), as the embedded node writes it: decode the struct into a
	// generic value so encoding/json sorts every object's keys.
	raw, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return "", err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(generic); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// MarshalCheckpoint implements checkpointmanager.Checkpoint.
func (c *Checkpoint) MarshalCheckpoint() ([]byte, error) {
	c.Data.APIVersion, c.Data.Kind = checkpointAPI, checkpointKind
	sort.Slice(c.Data.Containers, func(i, j int) bool {
		a, b := c.Data.Containers[i], c.Data.Containers[j]
		return a.PodUID < b.PodUID || (a.PodUID == b.PodUID && a.Container < b.Container)
	})
	if c.Data.Containers == nil {
		c.Data.Containers = []Record{}
	}
	if c.Data.Pending == nil {
		c.Data.Pending = []Owed{}
	}
	text, err := c.Data.canonical()
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString(`{"Data":`)
	writePyString(&b, text)
	fmt.Fprintf(&b, `,"Checksum":%d}`, crc32.ChecksumIEEE([]byte(text)))
	return []byte(b.String()), nil
}

// RestoreError is the advice the kubelet stops with when cci_manager_state cannot be used: the embedded
// node's words (checkpoint.py restore_error), which follow the CPU manager's own restore failure.
func RestoreError(path, problem string) error {
	return fmt.Errorf("could not restore state from checkpoint: %s: %s, please drain this node and delete the CCI "+
		"manager checkpoint file %s before restarting the node (the CCI drivers keep their own state: remove their "+
		"grants too, e.g. by restarting them with an empty state directory)", filepath.Base(path), problem, pyRepr(path))
}

// UnmarshalCheckpoint implements checkpointmanager.Checkpoint; the checksum is checked in VerifyChecksum.
func (c *Checkpoint) UnmarshalCheckpoint(blob []byte) error {
	var outer map[string]json.RawMessage
	if err := json.Unmarshal(blob, &outer); err != nil {
		return RestoreError(c.path, fmt.Sprintf("not JSON (%v)", err))
	}
	var checksum uint32
	if len(outer) != 2 || json.Unmarshal(outer["Data"], &c.dataText) != nil || json.Unmarshal(outer["Checksum"], &checksum) != nil {
		return RestoreError(c.path, `not a {"Data": string, "Checksum": number} object`)
	}
	c.checksum = checksum
	return nil
}

// VerifyChecksum implements checkpointmanager.Checkpoint and decodes Data once the checksum matched.
func (c *Checkpoint) VerifyChecksum() error {
	if crc32.ChecksumIEEE([]byte(c.dataText)) != c.checksum {
		return RestoreError(c.path, "checkpoint is corrupted (checksum mismatch)")
	}
	var data StateData
	dec := json.NewDecoder(strings.NewReader(c.dataText))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&data); err != nil {
		return RestoreError(c.path, fmt.Sprintf("Data is not JSON (%v)", err))
	}
	if data.Kind != checkpointKind || data.APIVersion != checkpointAPI {
		return RestoreError(c.path, fmt.Sprintf("Data is not a %s of %s", checkpointKind, checkpointAPI))
	}
	for i, r := range data.Containers {
		for what, text := range map[string]string{"exclusive": r.Exclusive, "withheld": r.Withheld, "shared": r.Shared} {
			if _, err := cpuset.Parse(text); err != nil {
				return RestoreError(c.path, fmt.Sprintf("unusable content (containers[%d].%s: %v)", i, what, err))
			}
		}
	}
	c.Data = data
	return nil
}

func recordOf(req Request, grant Grant, driver string) Record {
	groups := make([]GroupRecord, len(grant.Groups))
	for i, g := range grant.Groups {
		groups[i] = GroupRecord{CPUSet: g.CPUs.String(), Exclusive: g.Exclusive}
	}
	return Record{
		PodUID: req.PodUID, Container: req.Container, Namespace: req.Namespace, PodName: req.PodName,
		ContainerID: "", Source: "cci", Exclusive: grant.Exclusive.String(), Withheld: grant.Withheld.String(),
		Shared: grant.Shared.String(), Groups: groups, ClaimUID: req.Claim.UID, ClaimName: req.Claim.Name,
		Driver: driver, Running: true,
	}
}

func mustParse(text string) cpuset.CPUSet {
	set, err := cpuset.Parse(text)
	if err != nil { // records are validated when restored and written from cpusets we formatted
		panic(fmt.Sprintf("cci manager: record holds %q, not a cpulist: %v", text, err))
	}
	return set
}
