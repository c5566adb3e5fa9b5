package main

// Claim parameters (docs/spec.md S2.1, S2.8, S2.10): the JSON in AdmitRequest.resource_handle, one entry
// per core group in four parallel arrays. Every refusal names the array, the index and the fix (S1.6).
// Counts are ASCII decimal digits only: no blanks, signs or other scripts' digits (S2.1).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
)

type siblingMode int

const (
	sibPreferred siblingMode = iota // also the default when no sibling attribute is given (S2.4)
	sibRequired
	sibDenied
)

type memMode int

const (
	memNone memMode = iota
	bindRequired
	bindPreferred
	interleaveRequired
	interleavePreferred
)

type devMode int

const (
	devNone devMode = iota
	devRequired
	devPreferred
)

// Group is one core group of a claim.
type Group struct {
	Lo, Hi    int // the count; Lo < Hi for a range (S2.8)
	Exclusive bool
	Sibling   siblingMode
	Mem       memMode
	Dev       devMode
	Device    string // lower-case PCI address when Dev != devNone
}

const (
	keyCores = "cores"
	keyCPU   = "cpu attributes"
	keyMem   = "mem attributes"
	keyDev   = "device attributes"
)

var memNames = map[string]memMode{
	"NO-MEM-AFFINITY":                        memNone,
	"NUMA-MEM-AFFINITY-BIND-REQUIRED":        bindRequired,
	"NUMA-MEM-AFFINITY-BIND-PREFERRED":       bindPreferred,
	"NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED":  interleaveRequired,
	"NUMA-MEM-AFFINITY-INTERLEAVE-PREFERRED": interleavePreferred,
}

var siblingNames = map[string]siblingMode{
	"CORE-SIBLING-REQUIRED":  sibRequired,
	"CORE-SIBLING-PREFERRED": sibPreferred,
	"CORE-SIBLING-DENIED":    sibDenied,
}

func isSibling(a string) bool { _, ok := siblingNames[a]; return ok }

var rangePattern = regexp.MustCompile(`^([0-9]+)-([0-9]+)$`)
var countPattern = regexp.MustCompile(`^[0-9]+$`)

func claimErr(key string, index int, format string, args ...any) error {
	return fmt.Errorf("claim parameters: `%s`[%d]: %s", key, index, fmt.Sprintf(format, args...))
}

// ParseClaim reads the claim parameters; allowRanges is the driver's core-ranges capability (S2.8).
func ParseClaim(handle string, allowRanges bool) ([]Group, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(handle)))
	dec.UseNumber()
	var top map[string]json.RawMessage
	if err := dec.Decode(&top); err != nil || top == nil || dec.More() {
		return nil, fmt.Errorf("claim parameters: resource_handle is not a JSON object (%q); fix: send "+
			`{"cores": ["<count>", ...], ...} as in docs/spec.md S2.1`, truncate(handle, 80))
	}
	for k := range top {
		switch k {
		case keyCores, keyCPU, keyMem, keyDev:
		default:
			return nil, fmt.Errorf("claim parameters: unknown key %q; fix: use only `cores`, `cpu attributes`, "+
				"`mem attributes`, `device attributes` (spelled with spaces, S2.1)", k)
		}
	}
	var cores []json.RawMessage
	if raw, ok := top[keyCores]; !ok || json.Unmarshal(raw, &cores) != nil || len(cores) == 0 {
		return nil, fmt.Errorf("claim parameters: `cores` is missing, not an array or empty; fix: give one " +
			`count per core group, e.g. "cores": ["4"]`)
	}
	groups := make([]Group, len(cores))
	for i, raw := range cores {
		lo, hi, err := parseCount(raw, i, allowRanges)
		if err != nil {
			return nil, err
		}
		groups[i].Lo, groups[i].Hi = lo, hi
	}
	arrays := map[string][]json.RawMessage{}
	for _, key := range []string{keyCPU, keyMem, keyDev} {
		raw, ok := top[key]
		if !ok {
			continue // absent: the default for every group (S2.1)
		}
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil || items == nil {
			return nil, fmt.Errorf("claim parameters: `%s` is not an array; fix: give one entry per core group", key)
		}
		if len(items) != len(cores) {
			return nil, fmt.Errorf("claim parameters: `%s` has %d entries but `cores` has %d; fix: give exactly "+
				"one entry per core group", key, len(items), len(cores))
		}
		arrays[key] = items
	}
	for i := range groups {
		g := &groups[i]
		if items, ok := arrays[keyCPU]; ok {
			if err := parseCPUAttrs(items[i], i, g); err != nil {
				return nil, err
			}
		}
		if items, ok := arrays[keyMem]; ok {
			if err := parseMemAttr(items[i], i, g); err != nil {
				return nil, err
			}
		}
		if items, ok := arrays[keyDev]; ok {
			if err := parseDevAttr(items[i], i, g); err != nil {
				return nil, err
			}
		}
		if g.Mem == interleaveRequired && g.Dev == devRequired {
			return nil, claimErr(keyMem, i, "NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED and "+
				"NUMA-DEVICE-AFFINITY-REQUIRED contradict each other (S2.10); fix: make one of them PREFERRED")
		}
	}
	return groups, nil
}

func parseCount(raw json.RawMessage, i int, allowRanges bool) (int, int, error) {
	var num json.Number
	if json.Unmarshal(raw, &num) == nil && countPattern.MatchString(num.String()) {
		return checkCount(num.String(), i)
	}
	var text string
	if json.Unmarshal(raw, &text) != nil {
		return 0, 0, claimErr(keyCores, i, "%s is neither a count nor a range; fix: a string such as \"4\"", raw)
	}
	if countPattern.MatchString(text) {
		return checkCount(text, i)
	}
	if m := rangePattern.FindStringSubmatch(text); m != nil {
		lo, errLo := strconv.Atoi(m[1])
		hi, errHi := strconv.Atoi(m[2])
		if errLo != nil || errHi != nil || lo < 1 || hi < lo || hi > maxCPUID {
			return 0, 0, claimErr(keyCores, i, "range %q is not LOW-HIGH with 1 <= LOW <= HIGH; fix: e.g. \"1-4\"", text)
		}
		if !allowRanges {
			return 0, 0, claimErr(keyCores, i, "range %q needs the core-ranges capability, which this driver "+
				"does not declare; fix: ask for a count", text)
		}
		return lo, hi, nil
	}
	return 0, 0, claimErr(keyCores, i, "%q is neither a count nor a range; fix: a count such as \"4\" or a "+
		"range such as \"1-4\"", text)
}

func checkCount(text string, i int) (int, int, error) {
	n, err := strconv.Atoi(text)
	if err != nil || n > maxCPUID {
		return 0, 0, claimErr(keyCores, i, "count %q is too large; fix: ask for at most the node's CPUs", text)
	}
	if n == 0 {
		return 0, 0, claimErr(keyCores, i, "a count of 0 is not allowed; fix: ask for at least 1 CPU")
	}
	return n, n, nil
}

// stringOrList reads an entry that may be one string or a list of strings (S2.1).
func stringOrList(raw json.RawMessage) ([]string, bool) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, true
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil && many != nil {
		return many, true
	}
	return nil, false
}

func parseCPUAttrs(raw json.RawMessage, i int, g *Group) error {
	attrs, ok := stringOrList(raw)
	if !ok {
		return claimErr(keyCPU, i, "%s is not a list of attribute names; fix: e.g. [\"EXCLUSIVE\"]", raw)
	}
	seen := map[string]bool{}
	exclusive, shared, sibling := false, false, ""
	for _, a := range attrs {
		if seen[a] {
			return claimErr(keyCPU, i, "%s is given twice; fix: name each attribute once", a)
		}
		seen[a] = true
		switch {
		case a == "EXCLUSIVE":
			exclusive = true
		case a == "SHARED":
			shared = true
		case isSibling(a):
			if sibling != "" {
				return claimErr(keyCPU, i, "%s and %s contradict each other (S2.10); fix: keep one CORE-SIBLING "+
					"attribute", sibling, a)
			}
			sibling = a
			g.Sibling = siblingNames[a]
		default:
			return claimErr(keyCPU, i, "unknown attribute %q; fix: use EXCLUSIVE, SHARED, CORE-SIBLING-REQUIRED, "+
				"CORE-SIBLING-PREFERRED or CORE-SIBLING-DENIED", a)
		}
	}
	if exclusive && shared {
		return claimErr(keyCPU, i, "EXCLUSIVE and SHARED contradict each other; fix: keep one of them")
	}
	if g.Sibling == sibDenied && !exclusive {
		return claimErr(keyCPU, i, "CORE-SIBLING-DENIED needs EXCLUSIVE (withholding siblings is exclusive "+
			"use, S2.10); fix: add EXCLUSIVE")
	}
	g.Exclusive = exclusive
	return nil
}

func parseMemAttr(raw json.RawMessage, i int, g *Group) error {
	attrs, ok := stringOrList(raw)
	if !ok || len(attrs) != 1 {
		return claimErr(keyMem, i, "%s is not one attribute name; fix: e.g. \"NO-MEM-AFFINITY\"", raw)
	}
	mode, known := memNames[attrs[0]]
	if !known {
		return claimErr(keyMem, i, "unknown attribute %q; fix: use NO-MEM-AFFINITY or "+
			"NUMA-MEM-AFFINITY-{BIND,INTERLEAVE}-{REQUIRED,PREFERRED}", attrs[0])
	}
	g.Mem = mode
	return nil
}

func parseDevAttr(raw json.RawMessage, i int, g *Group) error {
	var name string
	if json.Unmarshal(raw, &name) == nil {
		if name != "NO-DEVICE-AFFINITY" {
			if name == "NUMA-DEVICE-AFFINITY-REQUIRED" || name == "NUMA-DEVICE-AFFINITY-PREFERRED" {
				return claimErr(keyDev, i, "%s names no device (S2.10); fix: {\"affinity\": %q, \"device\": "+
					"\"<PCI address>\"}", name, name)
			}
			return claimErr(keyDev, i, "unknown attribute %q; fix: \"NO-DEVICE-AFFINITY\" or an object "+
				"{\"affinity\": ..., \"device\": ...}", name)
		}
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return claimErr(keyDev, i, "%s is neither \"NO-DEVICE-AFFINITY\" nor an object; fix: "+
			"{\"affinity\": \"NUMA-DEVICE-AFFINITY-REQUIRED\", \"device\": \"0000:3b:00.0\"}", raw)
	}
	for k := range obj {
		if k != "affinity" && k != "device" {
			return claimErr(keyDev, i, "unknown key %q; fix: only `affinity` and `device`", k)
		}
	}
	var affinity, device string
	if a, ok := obj["affinity"]; !ok || json.Unmarshal(a, &affinity) != nil {
		return claimErr(keyDev, i, "`affinity` is missing or not a string; fix: NUMA-DEVICE-AFFINITY-REQUIRED "+
			"or -PREFERRED")
	}
	hasDevice := false
	if d, ok := obj["device"]; ok {
		if json.Unmarshal(d, &device) != nil {
			return claimErr(keyDev, i, "`device` is not a string; fix: a PCI address such as \"0000:3b:00.0\"")
		}
		hasDevice = true
	}
	switch affinity {
	case "NUMA-DEVICE-AFFINITY-REQUIRED":
		g.Dev = devRequired
	case "NUMA-DEVICE-AFFINITY-PREFERRED":
		g.Dev = devPreferred
	case "NO-DEVICE-AFFINITY":
		if hasDevice {
			return claimErr(keyDev, i, "NO-DEVICE-AFFINITY names a device (S2.10); fix: drop `device` or ask "+
				"for a NUMA-DEVICE-AFFINITY")
		}
		return nil
	default:
		return claimErr(keyDev, i, "unknown affinity %q; fix: NUMA-DEVICE-AFFINITY-REQUIRED or -PREFERRED", affinity)
	}
	if !hasDevice || device == "" {
		return claimErr(keyDev, i, "%s names no device (S2.10); fix: add \"device\": \"<PCI address>\"", affinity)
	}
	if !pciAddress.MatchString(device) {
		return claimErr(keyDev, i, "device %q is not a lower-case PCI address; fix: domain:bus:slot.function "+
			"as under /sys/bus/pci/devices, e.g. \"0000:3b:00.0\"", device)
	}
	g.Device = device
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
