package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
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
