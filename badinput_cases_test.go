package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// operations lists the document's operations, sorted by path and method.
func (r *biRun) operations() []*biOp {
	var ops []*biOp
	paths := asMap(r.doc["paths"])
	for _, p := range sortedKeys(paths) {
		item := asMap(paths[p])
		for _, m := range []string{"get", "post", "put", "patch", "delete"} {
			o := asMap(item[m])
			if o == nil {
				continue
			}
			op := &biOp{id: fmt.Sprint(o["operationId"]), method: strings.ToUpper(m), path: p}
			for _, ps := range append(asSlice(item["parameters"]), asSlice(o["parameters"])...) {
				op.params = append(op.params, (&gen{doc: r.doc}).resolve(asMap(ps)))
			}
			content := asMap(asMap((&gen{doc: r.doc}).resolve(asMap(o["requestBody"])))["content"])
			op.body = asMap(asMap(content["application/json"])["schema"])
			_, op.textPlain = content["text/plain"]
			if sec, ok := o["security"].([]any); ok && len(sec) == 0 {
				op.noAuth = true
			}
			ops = append(ops, op)
		}
	}
	return ops
}

func (r *biRun) marker() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.serial++
	return fmt.Sprintf("bi%s-%d", r.e.run, r.serial)
}

// uri builds the request path and query of base, with path parameter
// rawPath[name] and query rawQuery used as already encoded when set.
func (r *biRun) uri(op *biOp, base baseReq, rawPath map[string]string, query string) string {
	p := op.path
	for _, prm := range op.params {
		if prm["in"] != "path" {
			continue
		}
		name := fmt.Sprint(prm["name"])
		v, ok := rawPath[name]
		if !ok {
			v = url.PathEscape(base.path[name])
		}
		p = strings.ReplaceAll(p, "{"+name+"}", v)
	}
	if query != "" {
		p += "?" + query
	}
	if op.extra {
		return p // a site path as written
	}
	return r.prefix + p
}

func encodeQuery(q [][2]string) string {
	var parts []string
	for _, kv := range q {
		parts = append(parts, url.QueryEscape(kv[0])+"="+url.QueryEscape(kv[1]))
	}
	return strings.Join(parts, "&")
}

// cases builds every input of op.
func (r *biRun) cases(op *biOp) []*biCase {
	var out []*biCase
	add := func(c *biCase) {
		c.op = op
		c.noAuth = c.noAuth || op.noAuth
		out = append(out, c)
	}
	probe := op.base("probe")
	if op.custom != nil {
		out = op.custom(r, op)
		for _, c := range out {
			c.op = op
			c.noAuth = c.noAuth || op.noAuth
		}
		probe.body = nil // no generated inputs
	}
	baseQuery := encodeQuery(probe.query)
	withBody := func(b baseReq) []byte {
		if b.body == nil {
			return nil
		}
		return encodeJSON(b.body)
	}
	// Body fields.
	if op.body != nil && probe.body != nil {
		g := &gen{doc: r.doc, base: probe.body}
		g.object("", g.resolve(op.body), probe.body)
		for _, mu := range g.out {
			m := r.marker()
			b := op.base(m)
			top, _, _ := strings.Cut(strings.SplitN(mu.field, ".", 2)[0], "[")
			for _, drop := range b.alone[top] {
				delete(b.body, drop)
			}
			body := clone(b.body).(map[string]any)
			setPath(body, mu.field, rawJSON(mu.raw), mu.remove)
			add(&biCase{field: mu.field, label: mu.label, uri: r.uri(op, b, nil, encodeQuery(b.query)), body: encodeJSON(body), expect: mu.expect, marker: m})
		}
	}
	// The body as a whole, its type and encoding.
	if op.body != nil && probe.body != nil {
		for _, w := range r.wholeBodies() {
			m := r.marker()
			b := op.base(m)
			body := w.make(encodeJSON(b.body))
			add(&biCase{label: w.label, uri: r.uri(op, b, nil, baseQuery), body: body, header: w.header, expect: w.expect, status: w.status, marker: m})
		}
		ctype := "text/plain"
		x, st := refuse, 415
		if op.textPlain {
			x, st = accept, 0
		}
		m := r.marker()
		b := op.base(m)
		add(&biCase{label: "Content-Type " + ctype, uri: r.uri(op, b, nil, baseQuery), body: withBody(b),
			header: [][2]string{{"Content-Type", ctype}}, expect: x, status: st, marker: m})
	}
	// Parameters (custom inputs bring their own).
	for _, prm := range op.params {
		if op.custom != nil {
			break
		}
		name, in := fmt.Sprint(prm["name"]), fmt.Sprint(prm["in"])
		switch in {
		case "path":
			for _, v := range pathValues {
				m := r.marker()
				b := op.base(m)
				add(&biCase{field: name, label: "path " + v.label, uri: r.uri(op, b, map[string]string{name: v.raw}, baseQuery), body: withBody(b), expect: refuse, marker: m})
			}
		case "query":
			schema := (&gen{doc: r.doc}).resolve(asMap(prm["schema"]))
			vals := queryValues(schema)
			if prm["required"] == true {
				vals = append(vals, qv{"missing", "", refuseFields, true})
			}
			for _, v := range vals {
				m := r.marker()
				b := op.base(m)
				var q []string
				for _, kv := range b.query {
					if kv[0] != name {
						q = append(q, url.QueryEscape(kv[0])+"="+url.QueryEscape(kv[1]))
					}
				}
				if !v.missing {
					q = append(q, url.QueryEscape(name)+"="+v.raw)
				}
				add(&biCase{field: name, label: "query " + v.label, uri: r.uri(op, b, nil, strings.Join(q, "&")), body: withBody(b), expect: v.expect, marker: m})
			}
		}
	}
	// Unknown parameters and credentials: every operation has these.
	for _, v := range []string{"zz=%00", "zz=%FF", "%FF=1", "zz=%ZZ", "zz"} {
		m := r.marker()
		b := op.base(m)
		q := v
		if baseQuery != "" {
			q = encodeQuery(b.query) + "&" + v
		}
		add(&biCase{label: "unknown query parameter " + v, uri: r.uri(op, b, nil, q), body: withBody(b), expect: either, marker: m})
	}
	if !op.noAuth && op.custom == nil {
		for _, a := range []struct{ label, v string }{
			{"Authorization with invalid UTF-8", "Bearer \xff\xfe"},
			{"Authorization of 10,000 characters", "Bearer ss_live_" + strings.Repeat("a", 10000)},
			{"Authorization Basic", "Basic dXNlcjpwYXNz"},
		} {
			m := r.marker()
			b := op.base(m)
			add(&biCase{label: a.label, uri: r.uri(op, b, nil, encodeQuery(b.query)), body: withBody(b),
				header: [][2]string{{"Authorization", a.v}}, noAuth: true, expect: refuse, status: 401, marker: m})
		}
	}
	for _, c := range out {
		if op.extra && c.expect == refuseFields {
			c.expect = refuse
		}
		if probe.refused {
			switch c.expect {
			case accept:
				c.expect = either
			case refuseFields:
				c.expect = refuse
			}
		}
	}
	return out
}

// pathValues are the malformed path ids: they must answer 400 or 404.
var pathValues = []struct{ label, raw string }{
	{"%00", "%00"}, {"%FF", "%FF"}, {"a%00b", "a%00b"}, {"%ZZ", "%ZZ"}, {"%2e%2e", "%2e%2e"},
	{"2,000 characters", strings.Repeat("a", 2000)}, {"ext:%00", "ext:%00"},
}

// qv is one query parameter value, already encoded.
type qv struct {
	label   string
	raw     string
	expect  expect
	missing bool
}

// queryValues returns the values tried for a query parameter of schema s.
func queryValues(s map[string]any) []qv {
	out := []qv{
		{"empty", "", refuseFields, false},
		{"%00", "%00", refuseFields, false},
		{"%FF", "%FF", refuseFields, false},
		{"a%00b", "a%00b", refuseFields, false},
		{"%ZZ", "%ZZ", refuse, false},
		{"10,000 characters", strings.Repeat("a", 10000), either, false},
	}
	numeric := map[string]string{"+5": "+5", "%2B5": "%2B5", "-1": "-1", "99999999999999999999": "99999999999999999999",
		"9223372036854775808": "9223372036854775808", "1.5": "1.5", "abc": "abc", "0x10": "0x10"}
	switch t, _ := s["type"].(string); {
	case t == "integer" || t == "number":
		lo, hasLo := num(s["minimum"])
		hi, hasHi := num(s["maximum"])
		for _, k := range sortedKeys(numeric) {
			x := refuseFields
			if k == "-1" && hasLo && lo <= -1 {
				x = either
			}
			out = append(out, qv{k, numeric[k], x, false})
		}
		if hasLo {
			out = append(out, qv{fmt.Sprintf("minimum %g", lo), fmt.Sprint(lo), accept, false}, qv{fmt.Sprintf("minimum-1 %g", lo-1), fmt.Sprint(lo - 1), refuseFields, false})
		}
		if hasHi {
			out = append(out, qv{fmt.Sprintf("maximum %g", hi), fmt.Sprint(hi), accept, false}, qv{fmt.Sprintf("maximum+1 %g", hi+1), fmt.Sprint(hi + 1), refuseFields, false})
		}
	case len(asSlice(s["enum"])) > 0:
		out = append(out, qv{"not one of the enum", "not-one-of-them", refuseFields, false})
		for _, v := range asSlice(s["enum"]) {
			out = append(out, qv{"enum value " + fmt.Sprint(v), url.QueryEscape(fmt.Sprint(v)), accept, false})
		}
	default:
		for _, k := range []string{"+5", "%2B5", "-1", "99999999999999999999"} {
			out = append(out, qv{k, numeric[k], either, false})
		}
	}
	return out
}

// wholeBody is one malformation of a whole body.
type wholeBody struct {
	label  string
	make   func(base []byte) []byte
	header [][2]string
	expect expect
	status int
}

func (r *biRun) wholeBodies() []wholeBody {
	fixed := func(s string) func([]byte) []byte { return func([]byte) []byte { return []byte(s) } }
	member := func(kv string) func([]byte) []byte {
		return func(b []byte) []byte { return append([]byte("{"+kv+","), b[1:]...) }
	}
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		_, _ = w.Write(b)
		_ = w.Close()
		return buf.Bytes()
	}
	return []wholeBody{
		{label: "empty body", make: fixed(""), expect: refuse},
		{label: "body null", make: fixed("null"), expect: refuse},
		{label: "body []", make: fixed("[]"), expect: refuse},
		{label: `body "text"`, make: fixed(`"text"`), expect: refuse},
		{label: "body 5", make: fixed("5"), expect: refuse},
		{label: "truncated JSON", make: func(b []byte) []byte { return b[:len(b)/2] }, expect: refuse},
		{label: "trailing garbage", make: func(b []byte) []byte { return append(b, 'x') }, expect: refuse},
		{label: "two JSON values", make: func(b []byte) []byte { return append(append(b, ' '), b...) }, expect: refuse},
		{label: "raw NUL byte after the body", make: func(b []byte) []byte { return append(b, 0) }, expect: refuse},
		{label: "1,000 levels of arrays", make: func([]byte) []byte { return nestedArrays(1000) }, expect: refuse},
		{label: "100,000 levels of arrays", make: func([]byte) []byte { return nestedArrays(100000) }, expect: refuse},
		{label: "invalid UTF-8 in an unknown member's name", make: member("\"z\xffz\":1"), expect: refuse},
		{label: "unknown member with NUL", make: member(`"zz":"a\u0000b"`), expect: either},
		{label: "unknown member 1,000 levels deep", make: member(`"zz":` + string(nested(1000))), expect: either},
		{label: "byte order mark", make: func(b []byte) []byte { return append([]byte("\xef\xbb\xbf"), b...) }, expect: either},
		{label: "Content-Type multipart/form-data", make: func(b []byte) []byte { return b },
			header: [][2]string{{"Content-Type", "multipart/form-data; boundary=x"}}, expect: refuse, status: 415},
		{label: "Content-Type text/html", make: func(b []byte) []byte { return b },
			header: [][2]string{{"Content-Type", "text/html"}}, expect: refuse, status: 415},
		// Decoding gzip or refusing it are both answers; parsing the
		// compressed bytes as if plain is not, nor ignoring the header.
		{label: "Content-Encoding gzip", make: gz, header: [][2]string{{"Content-Encoding", "gzip"}}, expect: either},
		{label: "Content-Encoding gzip on a plain body", make: func(b []byte) []byte { return b },
			header: [][2]string{{"Content-Encoding", "gzip"}}, expect: refuse},
		{label: "Content-Encoding gzip of 40 MB (over every body cap)", make: func([]byte) []byte { return gzipBomb() },
			header: [][2]string{{"Content-Encoding", "gzip"}}, expect: refuse},
		{label: "Content-Encoding gzip, then garbage", make: func(b []byte) []byte { return append(gz(b), "garbage"...) },
			header: [][2]string{{"Content-Encoding", "gzip"}}, expect: refuse},
		{label: "Content-Encoding br on a plain body", make: func(b []byte) []byte { return b },
			header: [][2]string{{"Content-Encoding", "br"}}, expect: refuse, status: 415},
	}
}

// gzipBomb is 40 MB of JSON in about 40 KB of gzip.
var gzipBomb = sync.OnceValue(func() []byte {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = w.Write([]byte(`{"zz":"`))
	_, _ = w.Write(bytes.Repeat([]byte("a"), 40<<20))
	_, _ = w.Write([]byte(`"}`))
	_ = w.Close()
	return buf.Bytes()
})

// encodeJSON writes v (maps, slices, strings, numbers, booleans, nil and
// rawJSON) with sorted keys and without HTML escaping; rawJSON is copied
// as is, so a body can carry bytes no encoder would write.
func encodeJSON(v any) []byte {
	var b bytes.Buffer
	writeJSON(&b, v)
	return b.Bytes()
}

func writeJSON(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case rawJSON:
		b.Write(x)
	case map[string]any:
		b.WriteByte('{')
		for i, k := range sortedKeys(x) {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSON(b, k)
			b.WriteByte(':')
			writeJSON(b, x[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSON(b, e)
		}
		b.WriteByte(']')
	default:
		enc := json.NewEncoder(b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(x)
		b.Truncate(b.Len() - 1) // Encode's newline
	}
}

// clone deep-copies a base body.
func clone(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = clone(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = clone(e)
		}
		return out
	}
	return v
}

// setPath puts v at path (a.b[0].c) in body, creating objects on the way;
// v nil with remove deletes the member.
func setPath(body map[string]any, path string, v any, remove bool) {
	parts := strings.Split(path, ".")
	var cur any = body
	for i, p := range parts {
		name, idx := p, -1
		if j := strings.IndexByte(p, '['); j >= 0 {
			name = p[:j]
			idx, _ = strconv.Atoi(strings.TrimSuffix(p[j+1:], "]"))
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return
		}
		last := i == len(parts)-1
		if idx < 0 {
			if last {
				if remove {
					delete(m, name)
				} else {
					m[name] = v
				}
				return
			}
			if _, ok := m[name].(map[string]any); !ok {
				m[name] = map[string]any{}
			}
			cur = m[name]
			continue
		}
		arr, _ := m[name].([]any)
		if idx >= len(arr) {
			return
		}
		if last {
			if remove {
				m[name] = append(arr[:idx:idx], arr[idx+1:]...)
			} else {
				arr[idx] = v
			}
			return
		}
		cur = arr[idx]
	}
}
