package baseline

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func TestEventBodyIsExactly216BytesOfValidUniqueJSON(t *testing.T) {
	seen := map[string]bool{}
	for _, n := range []uint64{0, 1, 999999, 1000000, 123456789012, 999999999999} {
		b := AppendEvent(nil, n)
		if len(b) != EventBodyLen {
			t.Fatalf("n=%d: %d bytes: %s", n, len(b), b)
		}
		var ev event
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatalf("n=%d: %v: %s", n, err, b)
		}
		if ev.Name != "purchase.completed" || ev.Value == nil || !strings.Contains(ev.ExternalID, RunToken) || ev.Properties["plan"] != "pro" {
			t.Fatalf("n=%d: decoded %+v", n, ev)
		}
		if seen[ev.ExternalID] {
			t.Fatalf("externalId %s repeated", ev.ExternalID)
		}
		seen[ev.ExternalID] = true
	}
}

func TestImportBodyHolds50DistinctEvents(t *testing.T) {
	var body struct{ Events []event }
	b := AppendImport(nil, 7)
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Events) != ImportRows {
		t.Fatalf("%d events", len(body.Events))
	}
	next := AppendImport(nil, 8)
	if strings.Contains(string(next), body.Events[ImportRows-1].ExternalID) {
		t.Fatal("consecutive import bodies share an externalId")
	}
}

func serveOnce(h fasthttp.RequestHandler, method string, body []byte) *fasthttp.Response {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetBody(body)
	h(&ctx)
	return &ctx.Response
}

func TestHTTPHandlers(t *testing.T) {
	if r := serveOnce(eventHandler, "POST", AppendEvent(nil, 1)); r.StatusCode() != 201 || !json.Valid(r.Body()) {
		t.Fatalf("event: %d %s", r.StatusCode(), r.Body())
	}
	if r := serveOnce(eventHandler, "POST", []byte("{")); r.StatusCode() != 400 {
		t.Fatalf("bad event: %d", r.StatusCode())
	}
	if r := serveOnce(eventHandler, "GET", nil); r.StatusCode() != 405 {
		t.Fatalf("GET event: %d", r.StatusCode())
	}
	r := serveOnce(importHandler, "POST", AppendImport(nil, 1))
	if r.StatusCode() != 201 || !strings.Contains(string(r.Body()), `"recorded":50`) {
		t.Fatalf("import: %d %s", r.StatusCode(), r.Body())
	}
	if r := serveOnce(helloHandler, "GET", nil); r.StatusCode() != 200 {
		t.Fatalf("hello: %d", r.StatusCode())
	}
}

func TestMessageIs4K(t *testing.T) {
	m := message4K()
	if len(m) != messageBytes || !strings.HasSuffix(string(m), "\r\n") || !strings.Contains(string(m), "\r\n\r\n") {
		t.Fatalf("%d bytes", len(m))
	}
}

func TestRegistry(t *testing.T) {
	for _, name := range []string{"http-hello", "http-json", "http-import", "pg-upsert-row", "pg-upsert-unnest", "pg-copy",
		"ch-insert-10k", "liquid-render", "smtp-sink", "dkim-sign", "kafka-produce"} {
		b, err := Get(name)
		if err != nil {
			t.Fatal(err)
		}
		if b.IsHTTP() == (b.Setup != nil) {
			t.Fatalf("%s: both or neither kind", name)
		}
	}
	if _, err := Get("nope"); err == nil {
		t.Fatal("unknown baseline must fail")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("duplicate registration must panic")
		}
	}()
	register(&Baseline{Name: "http-json", Handler: helloHandler, Request: nil})
}

// The stack-free work baselines run briefly and count what they did.
func TestStackFreeWorkBaselinesRun(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for _, name := range []string{"liquid-render", "smtp-sink", "dkim-sign"} {
		b, _ := Get(name)
		res, err := RunWork(context.Background(), b, Env{}, 20*time.Millisecond, 150*time.Millisecond)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.Ops <= 0 || res.OpsPerSec <= 0 || res.Errors != 0 || res.Calls.Count == 0 {
			t.Fatalf("%s: %+v", name, res)
		}
		t.Logf("%s: %.0f %s/s, %.1f µs CPU each", name, res.OpsPerSec, res.Unit, res.CPUUsPerOp)
	}
}
