package ingest

import (
	"context"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"sendstream/ingest/auth"
	"sendstream/schemas"
)

type nopPublisher struct{}

func (nopPublisher) Publish(context.Context, string, ...schemas.Envelope) error { return nil }

type oneKey struct{ hash [32]byte }

func (o oneKey) Resolve(_ context.Context, kind string, h [32]byte) (auth.Identity, error) {
	if h != o.hash {
		return auth.Identity{}, auth.ErrUnknown
	}
	return auth.Identity{KeyID: "k1", Kind: kind, Workspace: "w1", WorkspaceName: "W", Plan: "pro", RateMultiplier: 1}, nil
}

// BenchmarkServeMe measures the server's own cost of GET /api/v1/me
// (routing, auth cache hit, handler, request-log record, response) without
// network, broker or Postgres: the publisher is a no-op and the rate limiter
// is off.
func BenchmarkServeMe(b *testing.B) {
	key := "ss_live_" + "0123456789012345678901234567890123456789"
	s, err := New(Config{}, Deps{Auth: oneKey{auth.Hash(key)}, Publisher: nopPublisher{}, Metrics: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	var req fasthttp.Request
	req.SetRequestURI("/api/v1/me")
	req.Header.Set("Authorization", "Bearer "+key)
	var rc fasthttp.RequestCtx
	rc.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil)
	s.handle(&rc)
	if rc.Response.StatusCode() != 200 {
		b.Fatalf("%d %s", rc.Response.StatusCode(), rc.Response.Body())
	}
	b.ReportAllocs()
	for b.Loop() {
		rc.Response.Reset()
		s.handle(&rc)
	}
}
