package ingest_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sendstream/ingest"
	"sendstream/ingest/ingesttest"
)

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestCompression)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// encoded posts body to path with the given Content-Type and
// Content-Encoding ("" sends none).
func encoded(t *testing.T, h *ingesttest.Harness, path, key, ct, ce string, body []byte) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", h.URL+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", ct)
	if ce != "" {
		req.Header.Set("Content-Encoding", ce)
	}
	resp, b := h.DoRequest(req)
	return resp.StatusCode, b
}

// Defect 7: a gzip body is decoded (it was parsed as if plain), within the
// route's body cap; other encodings and multipart bodies answer 415 (a
// multipart body answered 400 bad_request before).
func TestContentEncodingAndMultipart(t *testing.T) {
	f := startFeatures(t, ingesttest.Options{})
	ws, key := f.NewWorkspace(t, ingesttest.WorkspaceOpts{Plan: "pro"})
	const js = "application/json"

	st, b := encoded(t, f.Harness, "/api/v1/contacts", key, js, "gzip", gz(t, []byte(`{"email":"gz@example.com","firstName":"Zip"}`)))
	if st != 201 || !bytes.Contains(b, []byte(`"firstName":"Zip"`)) {
		t.Fatalf("gzip body: %d %s", st, b)
	}
	// The decoded body obeys the text rule too.
	st, b = encoded(t, f.Harness, "/api/v1/contacts", key, js, "x-gzip", gz(t, []byte(`{"email":"gz2@example.com","firstName":"a\u0000"}`)))
	wantError(t, "gzip with NUL", st, b, 400, "invalid_text", "firstName")

	// A bomb: 17 MB of spaces inside a JSON string, about 17 KB compressed,
	// over the 16 MB cap of /v1 once decoded.
	bomb := gz(t, append(append([]byte(`{"email":"bomb@example.com","firstName":"`), bytes.Repeat([]byte(" "), 17<<20)...), `"}`...))
	if len(bomb) > 64<<10 {
		t.Fatalf("bomb is %d bytes compressed", len(bomb))
	}
	st, b = encoded(t, f.Harness, "/api/v1/contacts", key, js, "gzip", bomb)
	wantError(t, "gzip bomb", st, b, 413, "PAYLOAD_TOO_LARGE")
	// On /public (64 KB cap) a 100 KB body decodes past the cap.
	st, b = encoded(t, f.Harness, "/api/public/events", key, js, "gzip",
		gz(t, []byte(`{"name":"x","properties":{"pad":"`+strings.Repeat("y", 100<<10)+`"}}`)))
	wantError(t, "gzip over the /public cap", st, b, 413, "PAYLOAD_TOO_LARGE")

	st, b = encoded(t, f.Harness, "/api/v1/contacts", key, js, "gzip", []byte(`{"email":"plain@example.com"}`))
	wantError(t, "not gzip", st, b, 400, "invalid_encoding")
	for _, ce := range []string{"br", "deflate", "zstd", "compress", "gzip, gzip"} {
		st, b := encoded(t, f.Harness, "/api/v1/contacts", key, js, ce, []byte(`{"email":"enc@example.com"}`))
		wantError(t, "Content-Encoding "+ce, st, b, 415, "unsupported_media_type")
		if !bytes.Contains(b, []byte("gzip")) {
			t.Errorf("415 for %s does not name the accepted encodings: %s", ce, b)
		}
	}
	if st, b := encoded(t, f.Harness, "/api/v1/contacts", key, js, "identity", []byte(`{"email":"id@example.com"}`)); st != 201 {
		t.Fatalf("identity: %d %s", st, b)
	}

	// Multipart: well-formed and malformed, on a JSON route and on one that
	// reads its own body.
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	_ = mw.WriteField("email", "mp@example.com")
	_ = mw.Close()
	for name, body := range map[string][]byte{"multipart": mp.Bytes(), "malformed multipart": []byte("--x\r\nnot a part")} {
		ct := mw.FormDataContentType()
		if name == "malformed multipart" {
			ct = "multipart/form-data; boundary=x"
		}
		st, b := encoded(t, f.Harness, "/api/v1/contacts", key, ct, "", body)
		wantError(t, name, st, b, 415, "unsupported_media_type")
	}
	var n int
	if err := f.PG.QueryRow(context.Background(), "SELECT count(*) FROM contacts WHERE workspace_id = $1", ws).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d contacts stored (%v), want the gzip and identity ones", n, err)
	}
	f.healthy(t)
}

// The error codes of requests fasthttp cannot read are the tier's own,
// never bad_request: 431 for oversized headers, 400 malformed_request for
// a broken request.
func TestUnreadableRequests(t *testing.T) {
	h := ingesttest.Start(t)
	for name, c := range map[string]struct {
		raw    string
		status int
		code   string
	}{
		"huge header":   {"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("a", 20<<10) + "\r\n\r\n", 431, "headers_too_large"},
		"broken chunks": {"POST /api/v1/me HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "malformed_request"},
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(h.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(conn, c.raw)
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		conn.Close()
		wantError(t, name, resp.StatusCode, b, c.status, c.code)
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff: %v", name, resp.Header)
		}
	}
}

// Defect 8: hardening headers on every answer; HTML pages get a strict
// CSP; track.js keeps its cross-origin, cacheable headers.
func TestHardeningHeaders(t *testing.T) {
	f := startFeatures(t, ingesttest.Options{})
	ws, key := f.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	l, err := f.contacts.CreateList(context.Background(), ws, "News", false)
	if err != nil {
		t.Fatal(err)
	}
	get := func(method, path, key string, body io.Reader) *http.Response {
		req, _ := http.NewRequest(method, f.URL+path, body)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, _ := f.DoRequest(req)
		return resp
	}
	api := map[string]*http.Response{
		"me 200":           get("GET", "/api/v1/me", key, nil),
		"me 401":           get("GET", "/api/v1/me", "", nil),
		"unknown /api":     get("GET", "/api/v1/nope", key, nil),
		"405":              get("DELETE", "/api/v1/contacts", key, nil),
		"contacts list":    get("GET", "/api/v1/contacts", key, nil),
		"public preflight": get("OPTIONS", "/api/public/events", "", nil),
	}
	for name, resp := range api {
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s (%d): headers %v", name, resp.StatusCode, resp.Header)
		}
	}
	if resp := get("GET", "/healthz", "", nil); resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("/healthz: %v", resp.Header)
	}
	pages := map[string]*http.Response{
		"form":               get("GET", "/forms/"+l.ID, "", nil),
		"form 404":           get("GET", "/forms/nope", "", nil),
		"form posted":        get("POST", "/forms/"+l.ID, "", strings.NewReader("email=page%40example.com")),
		"confirm":            get("GET", "/confirm?token=bad", "", nil),
		"unsubscribe":        get("GET", "/unsubscribe/bad", "", nil),
		"unsubscribe (POST)": get("POST", "/unsubscribe/bad", "", strings.NewReader("List-Unsubscribe=One-Click")),
	}
	for name, resp := range pages {
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Errorf("%s: not a page: %d %v", name, resp.StatusCode, resp.Header)
			continue
		}
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'", "form-action 'self'", "base-uri 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %s", name, csp, want)
			}
		}
		if resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("Referrer-Policy") != "no-referrer" ||
			resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: headers %v", name, resp.Header)
		}
	}
	js := get("GET", "/track.js", "", nil)
	if js.StatusCode != 200 || js.Header.Get("Access-Control-Allow-Origin") != "*" || js.Header.Get("Cache-Control") != "public, max-age=300" ||
		js.Header.Get("X-Content-Type-Options") != "nosniff" || js.Header.Get("Content-Security-Policy") != "" {
		t.Errorf("/track.js: %d %v", js.StatusCode, js.Header)
	}
}

// Defect 8: /metrics is closed on the public listener unless a token is
// configured, then it needs that token; ServeMetrics serves it on a
// separate listener.
func TestMetricsAreNotPublic(t *testing.T) {
	open := ingesttest.Start(t)
	if st, b := open.Do("GET", "/metrics", "", nil); st != 404 || bytes.Contains(b, []byte("sendstream_")) {
		t.Fatalf("/metrics without a configured token: %d %.200s", st, b)
	}
	h := ingesttest.StartWith(t, ingesttest.Options{Config: ingest.Config{MetricsToken: "s3cret-metrics"}})
	for name, tok := range map[string]string{"no token": "", "wrong token": "s3cret-metricz", "prefix": "s3cret"} {
		st, b := h.Do("GET", "/metrics", tok, nil)
		wantError(t, name, st, b, 401, "unauthorized")
	}
	if st, b := h.Do("GET", "/metrics", "s3cret-metrics", nil); st != 200 || !bytes.Contains(b, []byte("sendstream_http_requests_total")) {
		t.Fatalf("/metrics with the token: %d %.200s", st, b)
	}

	// A separate listener, without a token.
	reg := prometheus.NewRegistry()
	srv, err := ingest.New(ingest.Config{}, ingest.Deps{PG: h.PG, Publisher: h.Publisher, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeMetrics(ln) }()
	base := "http://" + ln.Addr().String()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte("sendstream_auth_cache_total")) {
		t.Fatalf("metrics listener: %d %.200s", resp.StatusCode, b)
	}
	if resp, err := http.Get(base + "/api/v1/me"); err != nil || resp.StatusCode != 404 {
		t.Fatalf("metrics listener serves another path: %v %v", resp, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeMetrics: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeMetrics did not return after Shutdown")
	}
}
