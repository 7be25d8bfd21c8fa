package contacts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sync"
	"time"

	"sendstream/schemas"
)

// Custom field types.
const (
	FieldString  = "string"
	FieldNumber  = "number"
	FieldBoolean = "boolean"
	FieldDate    = "date"
)

var fieldKeyRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}$`)

// ValidFieldKey reports whether k can name a custom field: a letter, then up
// to 63 letters, digits or underscores.
func ValidFieldKey(k string) bool { return fieldKeyRE.MatchString(k) }

// ValidFieldType reports whether t is a custom field type.
func ValidFieldType(t string) bool {
	switch t {
	case FieldString, FieldNumber, FieldBoolean, FieldDate:
		return true
	}
	return false
}

// FieldError names a custom field whose value has the wrong type.
type FieldError struct {
	Key  string
	Type string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("customFields.%s must be a %s", e.Key, typeNoun(e.Type))
}

func typeNoun(t string) string {
	switch t {
	case FieldDate:
		return "date (YYYY-MM-DD or RFC 3339 date-time string)"
	}
	return t
}

// checkFieldValue validates one JSON value against a field type and returns
// it normalized: strings as is, numbers as json.Number, booleans as bool,
// dates as YYYY-MM-DD or an RFC 3339 UTC date-time; JSON null gives nil
// (remove the value).
func checkFieldValue(typ string, raw json.RawMessage) (any, bool) {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "null" {
		return nil, true
	}
	switch typ {
	case FieldString:
		s, ok := schemas.JSONString(raw)
		if !ok {
			return nil, false
		}
		return s, true
	case FieldNumber:
		if len(raw) == 0 || !(raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
			return nil, false
		}
		var n json.Number
		if json.Unmarshal(raw, &n) != nil {
			return nil, false
		}
		if _, err := n.Float64(); err != nil {
			return nil, false
		}
		if _, fits := numericTextLen(raw); !fits { // 1e-20000: jsonb cannot store it
			return nil, false
		}
		return n, true
	case FieldBoolean:
		var b bool
		if json.Unmarshal(raw, &b) != nil {
			return nil, false
		}
		return b, true
	case FieldDate:
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, false
		}
		if t, err := time.Parse("2006-01-02", s); err == nil {
			return t.Format("2006-01-02"), true
		}
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return t.UTC().Format(time.RFC3339Nano), true
		}
		return nil, false
	}
	return nil, false
}

// fieldCache keeps each workspace's custom field definitions. Definitions
// are only ever added (a key's type never changes), so a cached key is never
// stale; a key the cache does not know triggers a reload, at most once per
// reloadEvery per workspace, so a field created by another process is
// recognised within that bound.
type fieldCache struct {
	load        func(ctx context.Context, ws string) (map[string]string, error)
	reloadEvery time.Duration

	mu sync.Mutex
	m  map[string]*fieldSet
}

type fieldSet struct {
	mu       sync.Mutex
	types    map[string]string
	loadedAt time.Time
}

// types returns the definitions of ws, reloading them when any of keys is
// unknown and the last load is older than reloadEvery.
func (c *fieldCache) types(ctx context.Context, ws string, keys []string) (map[string]string, error) {
	c.mu.Lock()
	fs := c.m[ws]
	if fs == nil {
		fs = &fieldSet{}
		c.m[ws] = fs
	}
	c.mu.Unlock()

	fs.mu.Lock()
	defer fs.mu.Unlock()
	missing := fs.types == nil
	for _, k := range keys {
		if _, ok := fs.types[k]; !ok {
			missing = true
			break
		}
	}
	if missing && (fs.types == nil || time.Since(fs.loadedAt) >= c.reloadEvery) {
		t, err := c.load(ctx, ws)
		if err != nil {
			return nil, err
		}
		fs.types, fs.loadedAt = t, time.Now()
	}
	return fs.types, nil
}

// forget drops ws's definitions so the next lookup reloads them.
func (c *fieldCache) forget(ws string) {
	c.mu.Lock()
	delete(c.m, ws)
	c.mu.Unlock()
}
