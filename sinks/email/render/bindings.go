package render

import (
	"encoding/json"
	"strings"
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
}

// NewBindings binds data (a decoded JSON object; values under `data` and,
// unless reserved, by bare name), the contact (nil when there is none) and
// its custom field values (`customField.<key>`).
func NewBindings(data map[string]any, c *Contact, customFields map[string]any) Bindings {
	m := make(map[string]any, len(data)+3)
	for k, v := range data {
		if k == RootData || k == RootContact || k == RootCustomField {
			continue
		}
		m[k] = v
	}
	if data == nil {
		data = map[string]any{}
	}
	m[RootData] = data
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

// Resolved reports whether a variable path has a value: every step exists
// and the value is not null. "x.y" looks under the bare name x (which is
// data.x unless x is reserved).
func (b Bindings) Resolved(path string) bool {
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
func (b Bindings) Unresolved(vars []string) []string {
	var out []string
	for _, v := range vars {
		if !b.Resolved(v) {
			out = append(out, v)
		}
	}
	return out
}

// DecodeData decodes a JSON object for binding: numbers become int64 when
// integral and in range (so 12345678901 renders as written) and float64
// otherwise. It returns the decoded object and its nesting depth (an empty
// object has depth 1). Null or absent data gives a nil map and depth 0.
func DecodeData(raw []byte) (map[string]any, int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, 0, nil
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, 0, err
	}
	depth := normalize(m)
	return m, depth, nil
}

// normalize converts json.Number values in place and returns the depth.
func normalize(v any) int {
	switch x := v.(type) {
	case map[string]any:
		d := 0
		for k, e := range x {
			if n, ok := e.(json.Number); ok {
				x[k] = number(n)
				continue
			}
			d = max(d, normalize(e))
		}
		return d + 1
	case []any:
		d := 0
		for i, e := range x {
			if n, ok := e.(json.Number); ok {
				x[i] = number(n)
				continue
			}
			d = max(d, normalize(e))
		}
		return d + 1
	}
	return 0
}

func number(n json.Number) any {
	if i, err := n.Int64(); err == nil {
		return i
	}
	if f, err := n.Float64(); err == nil {
		return f
	}
	return n.String()
}
