package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/buger/jsonparser"
)

// Reserved top-level names. A data key with one of these names is reachable
// only as data.<name>.
const (
	RootData        = "data"
	RootContact     = "contact"
	RootCustomField = "customField"
)

// Contact is what a template sees as `contact`: snake_case names as Liquid
// authors write them (contact.first_name), plus the camelCase names of the
// API (contact.firstName) for the same values.
type Contact struct {
	ID        string
	Email     string
	FirstName string
	Country   string
	Language  string
	Status    string
}

// Bindings are the variables of one render. Build them with NewBindings;
// the zero value binds nothing.
type Bindings struct {
	m map[string]any
	// raw, set by NewRawBindings, is the data object still as JSON: data
	// paths resolve against it and m holds the contact and custom fields.
	raw []byte
}

// NewBindings binds data (a decoded JSON object; values under `data` and,
// unless reserved, by bare name), the contact (nil when there is none) and
// its custom field values (`customField.<key>`).
func NewBindings(data map[string]any, c *Contact, customFields map[string]any) Bindings {
	m := make(map[string]any, len(data)+3)
	bindData(m, data)
	if c != nil {
		cm := map[string]any{"email": c.Email, "id": c.ID}
		set := func(snake, camel, v string) {
			if v != "" {
				cm[snake] = v
				if camel != "" {
					cm[camel] = v
				}
			}
		}
		set("first_name", "firstName", c.FirstName)
		set("country", "", c.Country)
		set("language", "", c.Language)
		set("status", "", c.Status)
		m[RootContact] = cm
	}
	if customFields == nil {
		customFields = map[string]any{}
	}
	m[RootCustomField] = customFields
	return Bindings{m: m}
}

// NewRawBindings is NewBindings(DecodeData(data), c, customFields) for
// checking variables only (Resolved, Unresolved): data stays JSON and each
// path is looked up in it, so nothing is decoded. data must be a JSON
// object already checked (or empty). Rendering with them decodes the data
// on every call: bindings made to render should come from NewBindings.
func NewRawBindings(data []byte, c *Contact, customFields map[string]any) Bindings {
	b := NewBindings(nil, c, customFields)
	b.raw = bytes.TrimSpace(data)
	if len(b.raw) == 0 || string(b.raw) == "null" {
		b.raw = []byte("{}")
	}
	return b
}

// bindData puts data into m: whole under `data`, and each key that is not
// reserved by its bare name.
func bindData(m, data map[string]any) {
	for k, v := range data {
		if k != RootData && k != RootContact && k != RootCustomField {
			m[k] = v
		}
	}
	if data == nil {
		data = map[string]any{}
	}
	m[RootData] = data
}

// forRender returns b itself, or for raw bindings the decoded equivalent
// (rendering raw bindings works, at the cost of a decode per call).
func (b Bindings) forRender() (Bindings, error) {
	if b.raw == nil {
		return b, nil
	}
	data, _, err := DecodeData(b.raw)
	if err != nil {
		return Bindings{}, err
	}
	m := maps.Clone(b.m)
	bindData(m, data)
	return Bindings{m: m}, nil
}

// Resolved reports whether a variable path has a value: every step exists
// and the value is not null. "x.y" looks under the bare name x (which is
// data.x unless x is reserved).
func (b Bindings) Resolved(path string) bool {
	if b.raw != nil && isDataPath(path) {
		return rawResolvedAll(b.raw, []string{path})[0]
	}
	var cur any = b.m
	for _, part := range strings.Split(path, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		cur, ok = obj[part]
		if !ok || cur == nil {
			return false
		}
	}
	return true
}

// Unresolved returns the paths of vars that Resolved rejects, in order.
// Raw bindings look all data paths up in one walk of the JSON.
func (b Bindings) Unresolved(vars []string) []string {
	var data []bool // raw bindings: whether each data path resolved
	if b.raw != nil {
		data = rawResolvedAll(b.raw, vars)
	}
	var out []string
	for i, v := range vars {
		var ok bool
		if data != nil && isDataPath(v) {
			ok = data[i]
		} else {
			ok = b.Resolved(v)
		}
		if !ok {
			out = append(out, v)
		}
	}
	return out
}

// isDataPath reports a path that looks into the data (not the contact or
// the custom fields).
func isDataPath(path string) bool {
	root, _, _ := strings.Cut(path, ".")
	return root != RootContact && root != RootCustomField
}

// rawResolvedAll is Resolved's answer for each data path of vars (other
// paths get false) against a JSON object not decoded: every object on the
// way is scanned once, for all the paths that go through it.
func rawResolvedAll(obj []byte, vars []string) []bool {
	res := make([]bool, len(vars))
	parts := make([][]string, len(vars))
	group := make([]int, 0, len(vars))
	for i, v := range vars {
		if !isDataPath(v) {
			continue
		}
		p := strings.Split(v, ".")
		if p[0] == RootData {
			p = p[1:]
		}
		if len(p) == 0 { // data itself
			res[i] = true
			continue
		}
		parts[i] = p
		group = append(group, i)
	}
	resolveLevel(obj, parts, group, 0, res)
	return res
}

// resolveLevel settles the paths in group (indexes into parts) whose step
// depth is a key of obj: a path resolves when its last step holds a value
// that is not null; one that goes on needs an object there, scanned next
// for all the paths through it. The last of repeated keys wins.
func resolveLevel(obj []byte, parts [][]string, group []int, depth int, res []bool) {
	type hit struct {
		v  []byte
		t  jsonparser.ValueType
		ok bool
	}
	hits := make([]hit, len(group))
	err := jsonparser.ObjectEach(obj, func(k, v []byte, vt jsonparser.ValueType, _ int) error {
		key := k
		if bytes.IndexByte(k, '\\') >= 0 {
			s, err := jsonparser.ParseString(k)
			if err != nil {
				return err
			}
			key = []byte(s)
		}
		for gi, pi := range group {
			if parts[pi][depth] == string(key) {
				hits[gi] = hit{v, vt, true}
			}
		}
		return nil
	})
	if err != nil {
		return
	}
	type branch struct {
		key  string
		v    []byte
		next []int
	}
	var branches []branch
	for gi, pi := range group {
		h := hits[gi]
		switch {
		case !h.ok || h.t == jsonparser.Null:
		case depth == len(parts[pi])-1:
			res[pi] = true
		case h.t == jsonparser.Object:
			key := parts[pi][depth]
			at := slices.IndexFunc(branches, func(b branch) bool { return b.key == key })
			if at < 0 {
				branches = append(branches, branch{key: key, v: h.v})
				at = len(branches) - 1
			}
			branches[at].next = append(branches[at].next, pi)
		}
	}
	for _, b := range branches {
		resolveLevel(b.v, parts, b.next, depth+1, res)
	}
}

// DataDepth is the nesting depth DecodeData reports for a checked JSON
// value (every object or array one level; an empty object 1), found by
// scanning instead of decoding.
func DataDepth(raw []byte) int {
	depth, deepest := 0, 0
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			depth++
			deepest = max(deepest, depth)
		case '}', ']':
			depth--
		}
	}
	return deepest
}

// DecodeData decodes a JSON object for binding: numbers become int64 when
// integral and in range (so 12345678901 renders as written) and float64
// otherwise. It returns the decoded object and its nesting depth (an empty
// object has depth 1). Null or absent data gives a nil map and depth 0.
// It decodes in one pass (dataDecoder), several times faster than
// encoding/json into interfaces, and expects JSON already checked (the
// request body, or a payload this module wrote).
func DecodeData(raw []byte) (map[string]any, int, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, 0, nil
	}
	if raw[0] != '{' {
		return nil, 0, errors.New("data is not a JSON object")
	}
	d := dataDecoder{b: raw}
	m, depth, err := d.object()
	if err != nil {
		return nil, 0, fmt.Errorf("decode data: %w", err)
	}
	return m, depth, nil
}

// number converts a JSON number to int64 when integral and in range, else
// float64 (its text when neither parses).
func number(n json.Number) any {
	if i, err := n.Int64(); err == nil {
		return i
	}
	if f, err := n.Float64(); err == nil {
		return f
	}
	return n.String()
}
