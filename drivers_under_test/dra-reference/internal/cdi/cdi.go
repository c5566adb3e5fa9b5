// Package cdi writes the per-claim CDI specs that tell the runtime, and so the NRI plugin, which claims a container has.
package cdi

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// Version is the CDI spec version written: env edits need 0.3.0; 0.6.0 is read by containerd 2.x.
const Version = "0.6.0"

// EnvPrefix starts the variable each claim's CDI device puts into its containers, followed by the
// claim UID with '-' as '_'. The kubelet hands a container the CDI devices of exactly the claims it
// names (resources.claims), so the variables are how a container's claims reach CreateContainer.
const EnvPrefix = "DRA_REFERENCE_CLAIM_"

// EnvName is the variable of one claim.
func EnvName(claimUID string) string {
	return EnvPrefix + strings.ReplaceAll(claimUID, "-", "_")
}

// Kind is the CDI kind ("vendor/class") of a driver's devices.
func Kind(driverName string) string { return driverName + "/cpu" }

// DeviceID is the fully qualified CDI device of one claim: unique per claim, never reused (the
// kubeletplugin helper's advice, so a runtime's CDI cache cannot hit a stale spec).
func DeviceID(driverName, claimUID string) string { return Kind(driverName) + "=" + claimUID }

// ClaimsFromEnv returns the claim UIDs of a container's environment.
func ClaimsFromEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		name, _, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(name, EnvPrefix) && len(name) > len(EnvPrefix) {
			out = append(out, strings.ReplaceAll(strings.TrimPrefix(name, EnvPrefix), "_", "-"))
		}
	}
	return out
}

// ClaimsFromDevices returns the claim UIDs among a container's CDI device names.
func ClaimsFromDevices(driverName string, names []string) []string {
	var out []string
	prefix := Kind(driverName) + "="
	for _, n := range names {
		if uid, ok := strings.CutPrefix(n, prefix); ok && uid != "" {
			out = append(out, uid)
		}
	}
	return out
}

func specPath(dir, driverName, claimUID string) string {
	return filepath.Join(dir, strings.ReplaceAll(driverName, "/", "_")+"-"+claimUID+".json")
}

// Write writes the spec of one claim atomically (temp file, rename): the runtime may read it at any time.
func Write(dir, driverName, claimUID, cpus string) error {
	spec := cdispec.Spec{Version: Version, Kind: Kind(driverName), Devices: []cdispec.Device{{
		Name:           claimUID,
		ContainerEdits: cdispec.ContainerEdits{Env: []string{EnvName(claimUID) + "=" + cpus}},
	}}}
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("CDI dir %s: %w", dir, err)
	}
	path := specPath(dir, driverName, claimUID)
	tmp, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("CDI spec in %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Remove deletes the spec of one claim; a missing spec is not an error (unprepare is idempotent).
func Remove(dir, driverName, claimUID string) error {
	err := os.Remove(specPath(dir, driverName, claimUID))
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}
