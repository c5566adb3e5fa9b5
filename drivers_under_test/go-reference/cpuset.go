package main

// A set of CPU ids with the Linux cpulist text form ("0-3,8"), as availableCpus and rSet.cpuset use it
// (docs/spec.md S1.4).

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// CPUSet is a bitset; the zero value is the empty set. Methods never modify their argument.
type CPUSet struct{ w []uint64 }

// NewCPUSet builds a set from ids.
func NewCPUSet(ids ...int) CPUSet {
	var s CPUSet
	for _, id := range ids {
		s.Add(id)
	}
	return s
}

// Add puts id into the set.
func (s *CPUSet) Add(id int) {
	for len(s.w) <= id/64 {
		s.w = append(s.w, 0)
	}
	s.w[id/64] |= 1 << uint(id%64)
}

// Has tells whether id is in the set.
func (s CPUSet) Has(id int) bool {
	return id >= 0 && id/64 < len(s.w) && s.w[id/64]&(1<<uint(id%64)) != 0
}

// Len is the number of CPUs in the set.
func (s CPUSet) Len() int {
	n := 0
	for _, w := range s.w {
		n += bits.OnesCount64(w)
	}
	return n
}

// IsEmpty tells whether the set holds no CPU.
func (s CPUSet) IsEmpty() bool { return s.Len() == 0 }

// List gives the ids in ascending order.
func (s CPUSet) List() []int {
	out := make([]int, 0, s.Len())
	for i, w := range s.w {
		for w != 0 {
			b := bits.TrailingZeros64(w)
			out = append(out, i*64+b)
			w &^= 1 << uint(b)
		}
	}
	return out
}

func (s CPUSet) combine(o CPUSet, op func(a, b uint64) uint64) CPUSet {
	n := len(s.w)
	if len(o.w) > n {
		n = len(o.w)
	}
	out := CPUSet{w: make([]uint64, n)}
	for i := range out.w {
		var a, b uint64
		if i < len(s.w) {
			a = s.w[i]
		}
		if i < len(o.w) {
			b = o.w[i]
		}
		out.w[i] = op(a, b)
	}
	return out
}

// Union is s ∪ o.
func (s CPUSet) Union(o CPUSet) CPUSet {
	return s.combine(o, func(a, b uint64) uint64 { return a | b })
}

// Intersect is s ∩ o.
func (s CPUSet) Intersect(o CPUSet) CPUSet {
	return s.combine(o, func(a, b uint64) uint64 { return a & b })
}

// Minus is s \ o.
func (s CPUSet) Minus(o CPUSet) CPUSet {
	return s.combine(o, func(a, b uint64) uint64 { return a &^ b })
}

// SubsetOf tells whether every CPU of s is in o (no allocation: placement calls it per core).
func (s CPUSet) SubsetOf(o CPUSet) bool {
	for i, w := range s.w {
		var other uint64
		if i < len(o.w) {
			other = o.w[i]
		}
		if w&^other != 0 {
			return false
		}
	}
	return true
}

// IntersectLen is |s ∩ o| without building the set.
func (s CPUSet) IntersectLen(o CPUSet) int {
	n := 0
	for i := 0; i < len(s.w) && i < len(o.w); i++ {
		n += bits.OnesCount64(s.w[i] & o.w[i])
	}
	return n
}

// Equal tells whether both sets hold the same CPUs.
func (s CPUSet) Equal(o CPUSet) bool { return s.SubsetOf(o) && o.SubsetOf(s) }

// String is the cpulist form: ascending, runs of two or more as "a-b"; the empty set is "".
func (s CPUSet) String() string {
	ids := s.List()
	var parts []string
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(ids[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", ids[i], ids[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// maxCPUID bounds parsed ids so a hostile list cannot make the bitset allocate gigabytes.
const maxCPUID = 1 << 16

// ParseCPUList reads a cpulist ("0-3,8", surrounding blanks and a trailing newline allowed; "" is empty).
func ParseCPUList(text string) (CPUSet, error) {
	var s CPUSet
	text = strings.TrimSpace(text)
	if text == "" {
		return s, nil
	}
	for _, part := range strings.Split(text, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := parseID(lo)
		if err != nil {
			return CPUSet{}, fmt.Errorf("cpulist %q: %v", text, err)
		}
		b := a
		if isRange {
			if b, err = parseID(hi); err != nil {
				return CPUSet{}, fmt.Errorf("cpulist %q: %v", text, err)
			}
			if b < a {
				return CPUSet{}, fmt.Errorf("cpulist %q: range %q runs backwards", text, part)
			}
		}
		for id := a; id <= b; id++ {
			s.Add(id)
		}
	}
	return s, nil
}

func parseID(t string) (int, error) {
	id, err := strconv.Atoi(t)
	if err != nil || id < 0 || id > maxCPUID || strings.TrimSpace(t) != t || t == "" || t[0] == '+' {
		return 0, fmt.Errorf("%q is not a CPU id (0..%d)", t, maxCPUID)
	}
	return id, nil
}
