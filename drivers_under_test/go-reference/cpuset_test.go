package main

import "testing"

func TestCPUListRoundTrip(t *testing.T) {
	for text, want := range map[string]string{"0-3,8": "0-3,8", " 5,1-2\n": "1-2,5", "": "", "7": "7",
		"0,1,2,4": "0-2,4", "60-70": "60-70"} {
		s, err := ParseCPUList(text)
		if err != nil || s.String() != want {
			t.Fatalf("%q -> %q (%v), want %q", text, s.String(), err, want)
		}
	}
}

func TestCPUListRejectsGarbage(t *testing.T) {
	for _, text := range []string{"a", "3-1", "1,,2", "-1", "1-", "99999999", "+3"} {
		if s, err := ParseCPUList(text); err == nil {
			t.Fatalf("%q parsed as %s", text, s)
		}
	}
}

func TestSetAlgebra(t *testing.T) {
	a, b := NewCPUSet(1, 2, 3, 100), NewCPUSet(3, 4)
	if a.Union(b).String() != "1-4,100" || a.Intersect(b).String() != "3" || a.Minus(b).String() != "1-2,100" {
		t.Fatal(a.Union(b), a.Intersect(b), a.Minus(b))
	}
	if !NewCPUSet(3).SubsetOf(a) || b.SubsetOf(a) || a.Len() != 4 {
		t.Fatal("subset or len wrong")
	}
}
