package ccimanager

import (
	"encoding/json"
	"regexp"
	"strconv"
)

// The kubelet reads a claim's parameters only to learn each core group's sibling rule (a
// CORE-SIBLING-DENIED group makes it withhold the idle siblings, docs/spec.md §2.4). Unparsable
// parameters are still forwarded to the driver unchanged: refusing them is the driver's job and a
// conformance requirement of its own. The rules below are the embedded node's (protocol/claims.py,
// with the core-ranges capability and no topology), so both nodes read the same claims the same way.

// ClaimGroup is what the kubelet needs of one core group of a claim.
type ClaimGroup struct {
	Exclusive bool
	Siblings  string // required | preferred | denied
}

// ClaimShape is a parsed claim: one entry per core group.
type ClaimShape struct {
	Groups []ClaimGroup
}

var (
	countRE = regexp.MustCompile(`^([0-9]+)$`)
	rangeRE = regexp.MustCompile(`^([0-9]+)-([0-9]+)$`)
	bdfRE   = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
)

var siblingAttrs = map[string]string{
	"CORE-SIBLING-REQUIRED": "required", "CORE-SIBLING-PREFERRED": "preferred", "CORE-SIBLING-DENIED": "denied",
}

var memAttrs = map[string]bool{
	"NUMA-MEM-AFFINITY-BIND-REQUIRED": true, "NUMA-MEM-AFFINITY-BIND-PREFERRED": true,
	"NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED": true, "NUMA-MEM-AFFINITY-INTERLEAVE-PREFERRED": true,
	"NO-MEM-AFFINITY": true,
}

var deviceAttrs = map[string]string{
	"NUMA-DEVICE-AFFINITY-REQUIRED": "required", "NUMA-DEVICE-AFFINITY-PREFERRED": "preferred",
	"NO-DEVICE-AFFINITY": "none",
}

// ParseClaimShape reads claim parameters; ok is false when the embedded node would not parse them either.
func ParseClaimShape(raw []byte) (ClaimShape, bool) {
	var data map[string]json.RawMessage
	if json.Unmarshal(raw, &data) != nil || data == nil {
		return ClaimShape{}, false
	}
	keys := []string{"cores", "cpu attributes", "mem attributes", "device attributes"}
	for k := range data {
		if !contains(keys, k) {
			return ClaimShape{}, false
		}
	}
	var cores []json.RawMessage
	if json.Unmarshal(data["cores"], &cores) != nil || len(cores) == 0 {
		return ClaimShape{}, false
	}
	arrays := map[string][]json.RawMessage{}
	for _, key := range keys[1:] {
		if rawArr, present := data[key]; present {
			var arr []json.RawMessage
			if json.Unmarshal(rawArr, &arr) != nil || arr == nil || len(arr) != len(cores) {
				return ClaimShape{}, false
			}
			arrays[key] = arr
		}
	}
	shape := ClaimShape{}
	for i, c := range cores {
		_, _, ok := parseCores(c)
		if !ok {
			return ClaimShape{}, false
		}
		group := ClaimGroup{Siblings: "preferred"}
		if arr, present := arrays["cpu attributes"]; present {
			if group, ok = parseCPUAttrs(arr[i]); !ok {
				return ClaimShape{}, false
			}
		}
		mem := "NO-MEM-AFFINITY"
		if arr, present := arrays["mem attributes"]; present {
			if mem, ok = parseMem(arr[i]); !ok {
				return ClaimShape{}, false
			}
		}
		device := "none"
		if arr, present := arrays["device attributes"]; present {
			if device, ok = parseDevice(arr[i]); !ok {
				return ClaimShape{}, false
			}
		}
		// contradictions the embedded node refuses (claims.py _check_group, without a topology)
		if mem == "NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED" && device == "required" {
			return ClaimShape{}, false
		}
		shape.Groups = append(shape.Groups, group)
	}
	return shape, true
}

func parseCores(raw json.RawMessage) (int, int, bool) {
	var text string
	if json.Unmarshal(raw, &text) != nil {
		var n json.Number
		if json.Unmarshal(raw, &n) != nil {
			return 0, 0, false
		}
		if _, err := n.Int64(); err != nil {
			return 0, 0, false
		}
		text = n.String()
	}
	if m := countRE.FindStringSubmatch(text); m != nil {
		n, err := strconv.Atoi(m[1])
		return n, n, err == nil && n >= 1
	}
	if m := rangeRE.FindStringSubmatch(text); m != nil {
		lo, err1 := strconv.Atoi(m[1])
		hi, err2 := strconv.Atoi(m[2])
		return lo, hi, err1 == nil && err2 == nil && lo >= 1 && hi >= lo
	}
	return 0, 0, false
}

func parseCPUAttrs(raw json.RawMessage) (ClaimGroup, bool) {
	var values []string
	var one string
	if json.Unmarshal(raw, &one) == nil {
		values = []string{one}
	} else if json.Unmarshal(raw, &values) != nil || values == nil {
		return ClaimGroup{}, false
	}
	seen := map[string]bool{}
	var sibling []string
	for _, v := range values {
		_, isSibling := siblingAttrs[v]
		if (v != "EXCLUSIVE" && v != "SHARED" && !isSibling) || seen[v] {
			return ClaimGroup{}, false
		}
		seen[v] = true
		if isSibling {
			sibling = append(sibling, v)
		}
	}
	if (seen["EXCLUSIVE"] && seen["SHARED"]) || len(sibling) > 1 {
		return ClaimGroup{}, false
	}
	group := ClaimGroup{Exclusive: seen["EXCLUSIVE"], Siblings: "preferred"}
	if len(sibling) == 1 {
		group.Siblings = siblingAttrs[sibling[0]]
	}
	if group.Siblings == "denied" && !group.Exclusive {
		return ClaimGroup{}, false
	}
	return group, true
}

func parseMem(raw json.RawMessage) (string, bool) {
	var one string
	if json.Unmarshal(raw, &one) != nil {
		var list []string
		if json.Unmarshal(raw, &list) != nil || len(list) != 1 {
			return "", false
		}
		one = list[0]
	}
	return one, memAttrs[one]
}

func parseDevice(raw json.RawMessage) (string, bool) {
	var value map[string]json.RawMessage
	var name string
	if json.Unmarshal(raw, &name) == nil {
		value = map[string]json.RawMessage{"affinity": raw}
	} else if json.Unmarshal(raw, &value) != nil || value == nil {
		return "", false
	}
	for k := range value {
		if k != "affinity" && k != "device" {
			return "", false
		}
	}
	var affinity string
	if json.Unmarshal(value["affinity"], &affinity) != nil {
		return "", false
	}
	mode, known := deviceAttrs[affinity]
	if !known {
		return "", false
	}
	deviceRaw, named := value["device"]
	if mode == "none" {
		return mode, !named || string(deviceRaw) == "null"
	}
	var device string
	if json.Unmarshal(deviceRaw, &device) != nil || !bdfRE.MatchString(device) {
		return "", false
	}
	return mode, true
}

func contains(list []string, s string) bool {
	for _, item := range list {
		if item == s {
			return true
		}
	}
	return false
}
