package main

import (
	"strings"
	"testing"
)

func TestParseClaimReadsEveryArray(t *testing.T) {
	groups, err := ParseClaim(`{"cores": ["5", 2, "1-4"],
		"cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-DENIED"], "SHARED", []],
		"mem attributes": ["NUMA-MEM-AFFINITY-BIND-REQUIRED", ["NO-MEM-AFFINITY"], "NUMA-MEM-AFFINITY-INTERLEAVE-PREFERRED"],
		"device attributes": [{"affinity": "NUMA-DEVICE-AFFINITY-PREFERRED", "device": "0000:3b:00.0"},
		                      "NO-DEVICE-AFFINITY", {"affinity": "NO-DEVICE-AFFINITY"}]}`, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []Group{
		{Lo: 5, Hi: 5, Exclusive: true, Sibling: sibDenied, Mem: bindRequired, Dev: devPreferred, Device: "0000:3b:00.0"},
		{Lo: 2, Hi: 2},
		{Lo: 1, Hi: 4, Mem: interleavePreferred},
	}
	for i := range want {
		if groups[i] != want[i] {
			t.Fatalf("group %d: %+v, want %+v", i, groups[i], want[i])
		}
	}
}

func TestParseClaimDefaults(t *testing.T) {
	groups, err := ParseClaim(`{"cores": ["3"]}`, false)
	if err != nil || len(groups) != 1 || groups[0] != (Group{Lo: 3, Hi: 3}) {
		t.Fatalf("%+v %v", groups, err)
	}
}

// Every refusal names the array and index and says how to fix it (S1.6, S2.10).
func TestParseClaimRefusals(t *testing.T) {
	cases := map[string]string{
		`not json`:                               "not a JSON object",
		`[1]`:                                    "not a JSON object",
		`{"cores": []}`:                          "`cores` is missing",
		`{"cores": ["2"], "gpu": 1}`:             `unknown key "gpu"`,
		`{"cores": ["0"]}`:                       "`cores`[0]: a count of 0",
		`{"cores": ["x"]}`:                       "`cores`[0]",
		`{"cores": [2.5]}`:                       "`cores`[0]",
		`{"cores": ["4-2"]}`:                     "`cores`[0]: range",
		`{"cores": [" 2"]}`:                      "`cores`[0]",
		`{"cores": ["1 - 3"]}`:                   "`cores`[0]",
		`{"cores": ["１"]}`:                       "`cores`[0]",
		`{"cores": ["1", "1-3"]}`:                "`cores`[1]: range \"1-3\" needs the core-ranges capability",
		`{"cores": ["1"], "cpu attributes": []}`: "has 0 entries but `cores` has 1",
		`{"cores": ["1", "1"], "cpu attributes": ["SHARED", ["EXCLUSIVE", "SHARED"]]}`:                                                                                                  "`cpu attributes`[1]: EXCLUSIVE and SHARED contradict",
		`{"cores": ["2"], "cpu attributes": [["CORE-SIBLING-DENIED"]]}`:                                                                                                                 "needs EXCLUSIVE",
		`{"cores": ["2"], "cpu attributes": [["CORE-SIBLING-DENIED", "CORE-SIBLING-REQUIRED", "EXCLUSIVE"]]}`:                                                                           "contradict",
		`{"cores": ["2"], "cpu attributes": [["EXCLUSIVE", "EXCLUSIVE"]]}`:                                                                                                              "given twice",
		`{"cores": ["2"], "cpu attributes": [["FAST"]]}`:                                                                                                                                `unknown attribute "FAST"`,
		`{"cores": ["2"], "mem attributes": ["HUGE_PAGE_SIZE_1M"]}`:                                                                                                                     "`mem attributes`[0]: unknown attribute",
		`{"cores": ["2"], "mem attributes": [["NO-MEM-AFFINITY", "NO-MEM-AFFINITY"]]}`:                                                                                                  "not one attribute",
		`{"cores": ["2"], "device attributes": ["NUMA-DEVICE-AFFINITY-REQUIRED"]}`:                                                                                                      "names no device",
		`{"cores": ["2"], "device attributes": [{"affinity": "NO-DEVICE-AFFINITY", "device": "0000:3b:00.0"}]}`:                                                                         "names a device",
		`{"cores": ["2"], "device attributes": [{"affinity": "NUMA-DEVICE-AFFINITY-REQUIRED", "device": "0000:3B:00.0"}]}`:                                                              "lower-case PCI address",
		`{"cores": ["2"], "device attributes": [{"affinity": "NUMA-DEVICE-AFFINITY-REQUIRED"}]}`:                                                                                        "names no device",
		`{"cores": ["2"], "mem attributes": ["NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED"], "device attributes": [{"affinity": "NUMA-DEVICE-AFFINITY-REQUIRED", "device": "0000:3b:00.0"}]}`: "contradict",
	}
	for handle, want := range cases {
		_, err := ParseClaim(handle, false)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", handle, err, want)
		}
		if err != nil && !strings.Contains(err.Error(), "fix:") {
			t.Errorf("%s: %v says no fix", handle, err)
		}
	}
}
