package ccimanager

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// The embedded node (cci_conformance/node) is the specification the patched kubelet must match word for
// word (docs/spec.md §1-3): its messages quote values with Python's repr and it sends resource_handle as
// Python's json.dumps(sort_keys=True). These helpers reproduce exactly those two formats, nothing more.

// pyRepr quotes s the way Python's repr quotes a str: single quotes unless s holds a single quote and
// no double quote; backslash escapes for the quote, backslash and non-printable characters.
func pyRepr(s string) string {
	quote := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		quote = '"'
	}
	var b strings.Builder
	b.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case !unicode.IsPrint(r) && r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case !unicode.IsPrint(r) && r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		case !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(quote)
	return b.String()
}

// pyListRepr is repr() of a Python list of str.
func pyListRepr(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = pyRepr(s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// pyFloat formats seconds as Python's "%g" does for the deadlines we print (six significant digits).
func pyFloat(v float64) string {
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// pyStatusCode names a gRPC code as Python's grpc.StatusCode prints it ("StatusCode.DEADLINE_EXCEEDED").
func pyStatusCode(code fmt.Stringer) string {
	name := code.String()
	var b strings.Builder
	for i, r := range name {
		if i > 0 && unicode.IsUpper(r) && unicode.IsLower(rune(name[i-1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return "StatusCode." + b.String()
}

// pyJSON re-encodes a JSON document as Python's json.dumps(value, sort_keys=True): ", " and ": "
// separators, ASCII only. The embedded node sends resource_handle in this form (cci.py admit_request),
// so a driver sees the same bytes from both nodes.
func pyJSON(raw []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	var b strings.Builder
	writePyJSON(&b, v)
	return b.String(), nil
}

func writePyJSON(b *strings.Builder, v any) {
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case json.Number:
		b.WriteString(pyNumber(t))
	case string:
		writePyString(b, t)
	case []any:
		b.WriteByte('[')
		for i, item := range t {
			if i > 0 {
				b.WriteString(", ")
			}
			writePyJSON(b, item)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys) // Python sorts str keys by code point; Go compares UTF-8 bytes: the same order
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writePyString(b, k)
			b.WriteString(": ")
			writePyJSON(b, t[k])
		}
		b.WriteByte('}')
	}
}

func writePyString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || (r > 0x7f && r < 0x10000):
			fmt.Fprintf(b, `\u%04x`, r)
		case r >= 0x10000:
			r -= 0x10000
			fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// pyNumber is how json.dumps writes a number json.loads read: integers as written, floats as repr(float)
// (shortest round-trip digits, positional between 1e-4 and 1e16, ".0" on whole numbers).
func pyNumber(n json.Number) string {
	text := n.String()
	if !strings.ContainsAny(text, ".eE") {
		return text
	}
	f, err := n.Float64()
	if err != nil {
		return text
	}
	abs := math.Abs(f)
	if abs == 0 || (abs >= 1e-4 && abs < 1e16) {
		out := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(out, ".") {
			out += ".0"
		}
		return out
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
