package main

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// This file turns the OpenAPI document into the bad-input suite's inputs:
// for every body field (recursively, array items included) and every
// parameter of an operation, the values of biValues and the edges of the
// limits its schema declares.

// expect is what the answer to one input must be.
type expect int

const (
	// refuseFields: 400 in the error format whose fields name the field.
	refuseFields expect = iota
	// refuse: any 4xx in the error format.
	refuse
	// accept: a 2xx (the input is valid, e.g. the inside edge of a limit).
	accept
	// either: a 2xx, or a 4xx in the error format (the input is valid
	// JSON whose meaning the document leaves open).
	either
)

func (x expect) String() string {
	return [...]string{"400 with fields", "4xx", "2xx", "2xx or 4xx"}[x]
}

// mutation is one value put at one field of a base body.
type mutation struct {
	field  string // path: a.b, a[0].b; "" for the whole body
	label  string
	raw    []byte // JSON text (possibly not UTF-8, possibly not valid JSON)
	remove bool   // remove the field instead
	expect expect
}

// rawJSON is a value written into a body as is.
type rawJSON []byte

func str(s string) []byte { b, _ := json.Marshal(s); return b }

// nested returns n levels of objects, {"a":{"a":…{}}}, the outermost counted.
func nested(n int) []byte {
	return []byte(strings.Repeat(`{"a":`, n-1) + "{}" + strings.Repeat("}", n-1))
}

// nestedArrays returns n levels of arrays.
func nestedArrays(n int) []byte {
	return []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
}

var (
	levelsRE  = regexp.MustCompile(`(\d+) (?:nesting )?levels`)
	ignoredRE = regexp.MustCompile(`(?i)(unknown keys|others) (are )?(silently )?ignored`)
	sizeRE    = regexp.MustCompile(`(?i)at most (\d+) KB`)
)

// gen walks one operation's body schema.
type gen struct {
	doc  map[string]any
	base map[string]any
	out  []mutation
}

func (g *gen) add(field, label string, raw []byte, x expect) {
	g.out = append(g.out, mutation{field: field, label: label, raw: raw, expect: x})
}

// resolve follows a local $ref.
func (g *gen) resolve(s map[string]any) map[string]any {
	for i := 0; i < 16 && s != nil; i++ {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		var cur any = g.doc
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			m, _ := cur.(map[string]any)
			cur = m[part]
		}
		s, _ = cur.(map[string]any)
	}
	return s
}

// alternatives returns the schemas a value may match: oneOf/anyOf members,
// else s itself.
func (g *gen) alternatives(s map[string]any) []map[string]any {
	for _, k := range []string{"oneOf", "anyOf"} {
		if list, ok := s[k].([]any); ok {
			var out []map[string]any
			for _, a := range list {
				if m, ok := a.(map[string]any); ok {
					out = append(out, g.resolve(m))
				}
			}
			return out
		}
	}
	return []map[string]any{s}
}

// types returns the JSON types s allows (integer also allows number's
// integral values); empty when the schema does not say.
func (g *gen) types(s map[string]any) map[string]bool {
	out := map[string]bool{}
	for _, a := range g.alternatives(s) {
		switch t := a["type"].(type) {
		case string:
			out[t] = true
		case []any:
			for _, x := range t {
				if s, ok := x.(string); ok {
					out[s] = true
				}
			}
		}
	}
	return out
}

// walk adds the mutations of the field at path with schema s; base is the
// base body's value there (nil when absent).
func (g *gen) walk(path string, s map[string]any, required bool, base any) {
	s = g.resolve(s)
	types := g.types(s)
	if len(types) == 0 {
		return
	}
	switch {
	case types["null"]:
		g.add(path, "null", []byte("null"), accept)
	case required:
		g.add(path, "null", []byte("null"), refuseFields)
	default:
		g.add(path, "null", []byte("null"), either)
	}
	for _, w := range []struct{ typ, label, raw string }{
		{"string", "wrong type: string", `"5"`},
		{"number", "wrong type: number", `5`},
		{"boolean", "wrong type: boolean", `true`},
		{"object", "wrong type: object", `{"a":"b"}`},
		{"array", "wrong type: array", `["a"]`},
	} {
		fits := types[w.typ] || (w.typ == "number" && types["integer"])
		if !fits {
			g.add(path, w.label, []byte(w.raw), refuseFields)
		}
	}
	if !types["array"] {
		g.add(path, "1,000 levels of arrays", nestedArrays(1000), refuseFields)
	}
	if !types["object"] {
		g.add(path, "1,000 levels of objects", nested(1000), refuseFields)
	}
	for _, a := range g.alternatives(s) {
		for t := range g.types(a) {
			switch t {
			case "string":
				g.text(path, a)
			case "number", "integer":
				g.number(path, a, t == "integer")
			case "object":
				g.object(path, a, base)
			case "array":
				g.array(path, a, base)
			}
		}
	}
}

// text adds the string inputs.
func (g *gen) text(path string, s map[string]any) {
	g.add(path, `NUL "a\u0000b"`, []byte(`"a\u0000b"`), refuseFields)
	g.add(path, "raw control byte 0x01 in a string", []byte("\"a\x01b\""), refuse)
	for _, bad := range []struct{ label, raw string }{
		{`invalid UTF-8 "a\xFFb"`, "\"a\xffb\""},
		{`invalid UTF-8: an encoded surrogate "\xED\xA0\x80"`, "\"\xed\xa0\x80\""},
		{`invalid UTF-8: an overlong "/" "\xC0\xAF"`, "\"\xc0\xaf\""},
		{`invalid UTF-8: truncated "\xE2\x82"`, "\"a\xe2\x82\""},
	} {
		g.add(path, bad.label, []byte(bad.raw), refuseFields)
	}
	g.add(path, `lone surrogate "a\ud800b"`, []byte(`"a\ud800b"`), either)
	g.add(path, `lone low surrogate "\udc00"`, []byte(`"\udc00"`), either)
	format, _ := s["format"].(string)
	pattern, _ := s["pattern"].(string)
	var re *regexp.Regexp
	if pattern != "" {
		re, _ = regexp.Compile(pattern)
	}
	matches := func(v string) bool { return re == nil || re.MatchString(v) }
	enum, _ := s["enum"].([]any)
	free := format == "" && len(enum) == 0
	if len(enum) > 0 {
		g.add(path, "not one of the enum", str("not-one-of-them"), refuseFields)
		for _, v := range enum {
			if v, ok := v.(string); ok {
				g.add(path, "enum value "+v, str(v), accept)
			}
		}
		if v, ok := enum[0].(string); ok && strings.ToUpper(v) != v {
			g.add(path, "enum value in upper case", str(strings.ToUpper(v)), either)
		}
	}
	switch format {
	case "email":
		for _, v := range []struct{ label, s string }{
			{"not an address", "not-an-address"},
			{"bidi override in an address", "a\u202eb@example.com"},
			{"zero-width space in an address", "a\u200bb@example.com"},
			{"address over 254 characters", strings.Repeat("a", 250) + "@example.com"},
			{"two @", "a@b@example.com"},
		} {
			g.add(path, v.label, str(v.s), refuseFields)
		}
		g.add(path, "fullwidth letters in an address", str("\uff41\uff42@example.com"), either)
		g.add(path, "IDN domain", str("user@exämple.com"), either)
	case "date-time":
		g.add(path, "not a date-time", str("not-a-date"), refuseFields)
		g.add(path, "date-time out of range", str("2024-13-45T25:61:00Z"), refuseFields)
		g.add(path, "year 1", str("0001-01-01T00:00:00Z"), either)
		g.add(path, "year 9999", str("9999-12-31T23:59:59Z"), either)
	}
	if re != nil && !re.MatchString("Not Valid!") {
		g.add(path, "not matching "+pattern, str("Not Valid!"), refuseFields)
	}
	if m, ok := num(s["minLength"]); ok && m >= 1 {
		g.add(path, fmt.Sprintf("minLength-1 (%d)", int(m)-1), str(strings.Repeat("a", int(m)-1)), refuseFields)
		if v := strings.Repeat("a", int(m)); free && matches(v) {
			g.add(path, fmt.Sprintf("minLength (%d)", int(m)), str(v), accept)
		}
	}
	if m, ok := num(s["maxLength"]); ok {
		n := int(m)
		if v := strings.Repeat("a", n); free && matches(v) {
			g.add(path, fmt.Sprintf("maxLength (%d)", n), str(v), accept)
		}
		if v := strings.Repeat("é", n); free && matches(v) {
			g.add(path, fmt.Sprintf("maxLength (%d) in 2-byte characters", n), str(v), accept)
		}
		g.add(path, fmt.Sprintf("maxLength+1 (%d)", n+1), str(strings.Repeat("a", n+1)), refuseFields)
	} else {
		x := either
		if format != "" || len(enum) > 0 {
			x = refuseFields
		}
		g.add(path, "1 MB string", str(strings.Repeat("x", 1<<20)), x)
	}
}

// number adds the numeric inputs.
func (g *gen) number(path string, s map[string]any, integer bool) {
	lo, hasLo := num(s["minimum"])
	hi, hasHi := num(s["maximum"])
	in := func(v float64) bool { return (!hasLo || v >= lo) && (!hasHi || v <= hi) }
	f := func(v float64) []byte { return strconv.AppendFloat(nil, v, 'g', -1, 64) }
	if hasLo {
		g.add(path, "minimum "+string(f(lo)), f(lo), accept)
		g.add(path, "minimum-1 "+string(f(lo-1)), f(lo-1), refuseFields)
	}
	if hasHi {
		g.add(path, "maximum "+string(f(hi)), f(hi), accept)
		g.add(path, "maximum+1 "+string(f(hi+1)), f(hi+1), refuseFields)
	}
	g.add(path, "1e309", []byte("1e309"), refuseFields)
	g.add(path, "-1e309", []byte("-1e309"), refuseFields)
	g.add(path, "1e-400", []byte("1e-400"), either)
	for _, v := range []struct {
		raw string
		f   float64
	}{{"9223372036854775808", math.Pow(2, 63)}, {"-9223372036854775809", -math.Pow(2, 63)}} {
		x := either
		if !in(v.f) {
			x = refuseFields
		}
		g.add(path, v.raw, []byte(v.raw), x)
	}
	if integer {
		g.add(path, "1.5 for an integer", []byte("1.5"), refuseFields)
	}
}

// object adds the inputs of an object: each declared property, the
// required ones missing, and for a free-form object (no properties) bad
// values and keys inside it and the depth and size the description states.
func (g *gen) object(path string, s map[string]any, base any) {
	bm, _ := base.(map[string]any)
	props, _ := s["properties"].(map[string]any)
	if len(props) > 0 {
		var req []string
		for _, r := range asList(s["required"]) {
			req = append(req, r)
			g.out = append(g.out, mutation{field: join(path, r), label: "required field missing", remove: true, expect: refuseFields})
		}
		for _, k := range sortedKeys(props) {
			ps, _ := props[k].(map[string]any)
			g.walk(join(path, k), ps, slices.Contains(req, k), bm[k])
		}
		return
	}
	desc, _ := s["description"].(string)
	ignored := ignoredRE.MatchString(desc)
	text := refuseFields
	if ignored {
		text = either
	}
	keys := []string{}
	for _, k := range sortedKeys(bm) {
		if _, ok := bm[k].(string); ok {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		p := join(path, k)
		g.add(p, `NUL "a\u0000b" in a free-form value`, []byte(`"a\u0000b"`), refuseFields)
		g.add(p, `invalid UTF-8 "a\xFFb" in a free-form value`, []byte("\"a\xffb\""), refuseFields)
		g.add(p, `lone surrogate "\ud800" in a free-form value`, []byte(`"\ud800"`), either)
		g.add(p, "1e309 in a free-form value", []byte("1e309"), either)
		g.add(p, "1 MB string in a free-form value", str(strings.Repeat("x", 1<<20)), either)
	}
	g.add(path, `NUL in a key {"a\u0000b":"x"}`, []byte(`{"a\u0000b":"x"}`), text)
	g.add(path, `invalid UTF-8 in a key {"a\xFFb":"x"}`, []byte("{\"a\xffb\":\"x\"}"), text)
	g.add(path, `lone surrogate in a key {"\ud800":"x"}`, []byte(`{"\ud800":"x"}`), either)
	deep := either
	if m := levelsRE.FindStringSubmatch(desc); m != nil {
		n, _ := strconv.Atoi(m[1])
		g.add(path, fmt.Sprintf("%d levels (the documented limit)", n), nested(n), accept)
		g.add(path, fmt.Sprintf("%d levels (one over)", n+1), nested(n+1), refuseFields)
		deep = refuseFields
	}
	g.add(path, "1,000 levels of objects", nested(1000), deep)
	if m := sizeRE.FindStringSubmatch(desc); m != nil {
		n, _ := strconv.Atoi(m[1])
		fill := func(size int) []byte { return []byte(`{"k":"` + strings.Repeat("x", size-8) + `"}`) }
		g.add(path, fmt.Sprintf("%d KB less 200 bytes (inside the documented size)", n), fill(n*1000-200), accept)
		g.add(path, fmt.Sprintf("%d KiB and 200 bytes (over the documented size)", n), fill(n*1024+200), refuseFields)
	}
}

// array adds the inputs of an array: its item bounds and its first item's
// fields.
func (g *gen) array(path string, s map[string]any, base any) {
	items := g.resolve(asMap(s["items"]))
	ba, _ := base.([]any)
	var elem any
	if len(ba) > 0 {
		elem = ba[0]
	}
	sample := func(i int) any {
		if elem != nil {
			return elem
		}
		if items["format"] == "email" {
			return fmt.Sprintf("item%d@example.com", i)
		}
		return nil
	}
	list := func(n int) []byte {
		out := make([]any, n)
		for i := range out {
			out[i] = sample(i)
		}
		return encodeJSON(out)
	}
	if m, ok := num(s["minItems"]); ok && m >= 1 {
		g.add(path, fmt.Sprintf("minItems-1 (%d items)", int(m)-1), list(int(m)-1), refuseFields)
	}
	if m, ok := num(s["maxItems"]); ok && sample(0) != nil {
		g.add(path, fmt.Sprintf("maxItems (%d items)", int(m)), list(int(m)), accept)
		g.add(path, fmt.Sprintf("maxItems+1 (%d items)", int(m)+1), list(int(m)+1), refuseFields)
	}
	if items != nil && elem != nil {
		g.walk(path+"[0]", items, true, elem)
	}
}

func num(v any) (float64, bool) { f, ok := v.(float64); return f, ok }

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }

func asList(v any) []string {
	var out []string
	for _, x := range asSlice(v) {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func asSlice(v any) []any { l, _ := v.([]any); return l }

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
