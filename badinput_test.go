package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sendstream/ingest/ingesttest"
)

// TestBadInputSuite is the issue-23 bad-input suite: for every operation of
// the OpenAPI document the server serves, every body field and parameter
// gets bad values (NUL, invalid UTF-8, lone surrogates, wrong JSON types,
// null, huge and tiny numbers, 1,000 levels of nesting, very long strings,
// each declared limit's edges), plus malformed bodies, content types,
// encodings, path ids and query strings. Every answer must be a 4xx in the
// error format (a 2xx only where the input is valid; never a 5xx); a refused
// write must leave the workspace as it was (Postgres rows and published
// envelopes); /healthz must still answer after each operation.
//
// SENDSTREAM_BADINPUT_FINDINGS names a file to write the distinct failures
// to, as Markdown.
func TestBadInputSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("the bad-input suite needs the local stack")
	}
	start := time.Now()
	e := newBIEnv(t)
	st, raw := e.call(t, "GET", "/api/v1/openapi.json", nil)
	var doc map[string]any
	if st != 200 || json.Unmarshal(raw, &doc) != nil {
		t.Fatalf("GET /api/v1/openapi.json: %d %.300s", st, raw)
	}
	prefix := "/api"
	if servers := asSlice(doc["servers"]); len(servers) > 0 {
		if u, err := url.Parse(fmt.Sprint(asMap(servers[0])["url"])); err == nil {
			prefix = strings.TrimRight(u.Path, "/")
		}
	}
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: biWorkers, DisableCompression: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer client.CloseIdleConnections()
	bases := biBases(e)
	r := &biRun{e: e, doc: doc, docText: string(raw), prefix: prefix, client: client}
	ops := r.operations()
	documented := len(ops)
	ops = append(ops, pageOps(e)...)
	for _, op := range ops {
		if op.base == nil {
			base, ok := bases[op.id]
			if !ok {
				t.Errorf("%s %s (%s): no base request in badinput_ops_test.go, so its inputs are not tried", op.method, op.path, op.id)
				continue
			}
			op.base = base
		}
		r.runOp(t, op)
	}
	sum := fmt.Sprintf("bad-input suite: %d inputs tried over %d operations (%d in the OpenAPI document, %d other public routes), %d 5xx, %d failures in %s",
		r.tried, len(ops), documented, len(ops)-documented, r.fiveXX, len(r.findings), time.Since(start).Round(time.Second))
	t.Log(sum)
	fmt.Println(sum)
	if path := os.Getenv("SENDSTREAM_BADINPUT_FINDINGS"); path != "" {
		if err := os.WriteFile(path, r.report(sum), 0o644); err != nil {
			t.Errorf("write findings: %v", err)
		}
	}
	for i, f := range r.findings {
		if i == 200 {
			t.Errorf("… and %d more failures", len(r.findings)-i)
			break
		}
		t.Errorf("%s", f.line())
	}
}

// biWorkers is how many requests the suite keeps in flight.
const biWorkers = 8

// biOp is one operation of the document.
type biOp struct {
	id, method, path string
	params           []map[string]any
	body             map[string]any // the application/json schema
	textPlain        bool           // the document also takes text/plain
	noAuth           bool           // security: []
	base             func(marker string) baseReq
	// Routes outside the document (badinput_pages_test.go): extra skips
	// the document's codes and field naming, page also the error format
	// (HTML answers); custom, when set, gives the inputs.
	extra, page bool
	custom      func(r *biRun, op *biOp) []*biCase
}

// biCase is one input.
type biCase struct {
	op     *biOp
	field  string // the field or parameter the input is about; "" for the body or request as a whole
	label  string
	uri    string
	body   []byte
	header [][2]string
	noAuth bool
	expect expect
	status int // when set, the exact status wanted
	marker string
	got    int // the status answered
}

// biFinding is one failure.
type biFinding struct {
	c       *biCase
	status  int
	body    string
	problem string
}

func (f biFinding) line() string {
	field := f.c.field
	if field == "" {
		field = "(request)"
	}
	return fmt.Sprintf("%s %s · %s · %s → %d %s: %s", f.c.op.method, f.c.op.path, field, f.c.label, f.status, clip(f.body, 300), f.problem)
}

type biRun struct {
	e       *biEnv
	doc     map[string]any
	docText string
	prefix  string
	client  *http.Client

	mu       sync.Mutex
	tried    int
	fiveXX   int
	serial   int
	findings []biFinding
}

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

// runOp sends the base request, then the inputs that must be refused
// (checking that they changed nothing), then the others, then /healthz.
func (r *biRun) runOp(t *testing.T, op *biOp) {
	t.Helper()
	cases := r.cases(op)
	m := r.marker()
	b := op.base(m)
	baseCase := &biCase{op: op, label: "the base request", uri: r.uri(op, b, nil, encodeQuery(b.query)), noAuth: op.noAuth, expect: accept, marker: m}
	if b.body != nil {
		baseCase.body = encodeJSON(b.body)
	}
	if b.raw != nil {
		baseCase.body, baseCase.header = b.raw, b.header
	}
	if b.refused {
		baseCase.expect = refuse
	}
	if st, body := r.do(baseCase); !r.ok(baseCase, st, body) {
		t.Errorf("%s %s: the base request answered %d %s; its inputs would prove nothing", op.method, op.path, st, clip(string(body), 300))
		return
	}
	var bad, rest []*biCase
	for _, c := range cases {
		if c.expect == refuse || c.expect == refuseFields {
			bad = append(bad, c)
		} else {
			rest = append(rest, c)
		}
	}
	before := r.e.snapshot(t)
	accepted := r.runAll(bad)
	after := r.e.snapshot(t)
	if accepted == 0 {
		markers := map[string]string{}
		for _, c := range bad {
			markers[c.marker] = c.field + " " + c.label
		}
		for _, ch := range before.changes(after, markers) {
			r.record(biFinding{c: &biCase{op: op, label: "the refused inputs together"}, problem: "a refused input changed the workspace: " + ch})
		}
	}
	r.runAll(rest)
	r.refusedStoredNothing(t, before, bad, rest)
	if err := r.e.healthz(r.client); err != nil {
		r.record(biFinding{c: &biCase{op: op, label: "after the operation's inputs"}, problem: "/healthz: " + err.Error()})
	}
	t.Logf("%s %s: %d inputs", op.method, op.path, len(cases))
}

// refusedStoredNothing records every input answered other than 2xx whose
// marker the workspace now carries.
func (r *biRun) refusedStoredNothing(t *testing.T, before snapshot, batches ...[]*biCase) {
	t.Helper()
	var markers []string
	byMarker := map[string]*biCase{}
	for _, cases := range batches {
		for _, c := range cases {
			if c.got < 200 || c.got > 299 {
				markers = append(markers, c.marker)
				byMarker[c.marker] = c
			}
		}
	}
	for m := range r.e.stored(t, before, r.e.snapshot(t), markers) {
		c := byMarker[m]
		r.record(biFinding{c: c, status: c.got, problem: "answered " + strconv.Itoa(c.got) + " but stored or published its input"})
	}
}

// runAll sends cases concurrently and checks each answer; it returns how
// many were answered 2xx.
func (r *biRun) runAll(cases []*biCase) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	n2xx := 0
	next := make(chan *biCase)
	for range biWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				st, body := r.do(c)
				c.got = st
				r.ok(c, st, body)
				if st >= 200 && st < 300 {
					mu.Lock()
					n2xx++
					mu.Unlock()
				}
			}
		}()
	}
	for _, c := range cases {
		next <- c
	}
	close(next)
	wg.Wait()
	return n2xx
}

// do sends one input; status 0 means no answer (body holds the error).
func (r *biRun) do(c *biCase) (int, []byte) {
	method := c.op.method
	var rd io.Reader
	if c.body != nil {
		rd = bytes.NewReader(c.body)
	}
	req, err := http.NewRequest(method, r.e.h.URL, rd)
	if err != nil {
		return 0, []byte("build request: " + err.Error())
	}
	// Sent as written: url.Parse refuses malformed escapes such as %ZZ.
	req.URL.Opaque, req.URL.RawQuery, _ = strings.Cut(c.uri, "?")
	if c.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.op.extra {
		req.Header.Set("Accept", "application/json")
	}
	if !c.noAuth {
		req.Header.Set("Authorization", "Bearer "+r.e.key)
	}
	for _, h := range c.header {
		req.Header[h[0]] = []string{h[1]}
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, []byte("read answer: " + err.Error())
	}
	if msg := ingesttest.ValidateResponse(req, resp, body); msg != "" && resp.StatusCode < 500 {
		r.record(biFinding{c: c, status: resp.StatusCode, body: string(body), problem: "the answer does not match the OpenAPI document: " + strings.TrimSpace(msg)})
	}
	return resp.StatusCode, body
}

// ok checks one answer against c's expectation, records what is wrong and
// reports whether nothing was.
func (r *biRun) ok(c *biCase, st int, body []byte) bool {
	r.mu.Lock()
	r.tried++
	if st >= 500 {
		r.fiveXX++
	}
	r.mu.Unlock()
	var problems []string
	switch {
	case st == 0:
		problems = append(problems, "no answer: "+string(body))
	case st >= 500:
		problems = append(problems, "a 5xx")
	case c.status != 0 && st != c.status:
		problems = append(problems, fmt.Sprintf("want %d", c.status))
	case c.expect == accept && (st < 200 || st > 299):
		problems = append(problems, "a valid input was refused")
	case (c.expect == refuse || c.expect == refuseFields) && st < 400:
		problems = append(problems, "a bad input was accepted")
	case c.expect == refuseFields && st != 400 && st != 413:
		problems = append(problems, "want 400 naming the field")
	}
	if st >= 400 && st < 500 && !c.op.page {
		problems = append(problems, r.errorFormat(c, st, body)...)
	}
	for _, p := range problems {
		r.record(biFinding{c: c, status: st, body: string(body), problem: p})
	}
	return len(problems) == 0
}

// errorFormat checks a 4xx body: JSON with error, a code the document
// names (not on 429), fields as strings, and on a 400 to an input about one
// field or parameter that must be named, fields naming it.
func (r *biRun) errorFormat(c *biCase, st int, body []byte) []string {
	var e struct {
		Error  *string         `json:"error"`
		Code   *string         `json:"code"`
		Fields json.RawMessage `json:"fields"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == nil || *e.Error == "" {
		return []string{"not the error format (JSON with error)"}
	}
	var out []string
	if st != 429 && !c.op.extra {
		switch {
		case e.Code == nil || *e.Code == "":
			out = append(out, "no code")
		case !strings.Contains(r.docText, "`"+*e.Code+"`") && !strings.Contains(r.docText, `"`+*e.Code+`"`):
			out = append(out, "code "+*e.Code+" is not in the OpenAPI document")
		}
	}
	var fields []string
	if len(e.Fields) > 0 && json.Unmarshal(e.Fields, &fields) != nil {
		out = append(out, "fields is not an array of strings")
	}
	if st == 400 && c.expect == refuseFields && c.field != "" && !names(fields, c.field) {
		out = append(out, "fields does not name "+c.field)
	}
	return out
}

// names reports whether fields names field, its parent or one of its
// children (a[0].b and a.0.b are the same path).
func names(fields []string, field string) bool {
	norm := func(s string) string { return strings.NewReplacer("[", ".", "]", "").Replace(s) }
	p := norm(field)
	for _, f := range fields {
		f = norm(f)
		if f == p || strings.HasPrefix(p, f+".") || strings.HasPrefix(f, p+".") {
			return true
		}
	}
	return false
}

func (r *biRun) record(f biFinding) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.findings = append(r.findings, f)
}

// report renders the findings as Markdown, grouped by operation.
func (r *biRun) report(summary string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# Bad-input suite findings\n\n%s (`go test -count=1 -run TestBadInputSuite .` at the repo root, %s).\n\n", summary, time.Now().UTC().Format(time.RFC3339))
	if len(r.findings) == 0 {
		b.WriteString("No failures.\n")
		return []byte(b.String())
	}
	sorted := append([]biFinding(nil), r.findings...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, c := sorted[i], sorted[j]
		if a.c.op.path+a.c.op.method != c.c.op.path+c.c.op.method {
			return a.c.op.path+a.c.op.method < c.c.op.path+c.c.op.method
		}
		return a.c.field < c.c.field
	})
	op := ""
	for _, f := range sorted {
		if k := f.c.op.method + " " + f.c.op.path; k != op {
			op = k
			fmt.Fprintf(&b, "\n## %s\n\n", op)
		}
		field := f.c.field
		if field == "" {
			field = "(request)"
		}
		fmt.Fprintf(&b, "- `%s` · %s → **%d** `%s`: %s\n", field, strings.ToValidUTF8(f.c.label, "?"), f.status, strings.ToValidUTF8(clip(f.body, 240), "?"), f.problem)
	}
	return []byte(b.String())
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
