package main

import (
	"bytes"
	"net/http"
	"testing"
	"time"
)

// /metrics is not open on the public port: `sendstream ingest` answers it
// 404 by default; with SENDSTREAM_METRICS_TOKEN only that bearer token
// opens it (401 otherwise); SENDSTREAM_METRICS_LISTEN serves it on a
// separate address.
func TestMetricsNeedTokenOrSeparateListener(t *testing.T) {
	e := newE2E(t)
	start := func(extra ...string) string {
		t.Helper()
		addr := freeAddr(t)
		e.start(t, "ingest-"+addr, append([]string{"SENDSTREAM_LISTEN=" + addr, "SENDSTREAM_SITE_URL=http://" + addr}, extra...), "ingest")
		base := "http://" + addr
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			if resp, err := http.Get(base + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return base
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("ingest on %s never became ready", addr)
		return ""
	}

	closed := start()
	if st, b, _ := get(t, closed+"/metrics", ""); st != 404 || bytes.Contains(b, []byte("sendstream_")) {
		t.Fatalf("/metrics by default: %d %.200s", st, b)
	}

	const token = "metrics-token-0123456789"
	metricsAddr := freeAddr(t)
	base := start("SENDSTREAM_METRICS_TOKEN="+token, "SENDSTREAM_METRICS_LISTEN="+metricsAddr)
	for name, tok := range map[string]string{"no token": "", "wrong token": token + "x"} {
		if st, b, h := get(t, base+"/metrics", tok); st != 401 || h.Get("WWW-Authenticate") == "" {
			t.Fatalf("/metrics with %s: %d %s", name, st, b)
		}
	}
	if st, b, h := get(t, base+"/metrics", token); st != 200 || !bytes.Contains(b, []byte("sendstream_http_requests_total")) ||
		h.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("/metrics with the token: %d %.200s %v", st, b, h)
	}
	if st, b, _ := get(t, "http://"+metricsAddr+"/metrics", ""); st != 200 || !bytes.Contains(b, []byte("sendstream_http_requests_total")) {
		t.Fatalf("metrics listener: %d %.200s", st, b)
	}
	if st, _, _ := get(t, "http://"+metricsAddr+"/api/v1/me", ""); st != 404 {
		t.Fatalf("metrics listener serves the API: %d", st)
	}
}
