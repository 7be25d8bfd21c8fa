package ingest_test

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"sendstream/ingest/ingesttest"
)

// load sends GET url with 64 concurrent connections for d and returns req/s.
func load(b *testing.B, addr, path, key string, d time.Duration) float64 {
	c := &fasthttp.HostClient{Addr: addr, MaxConns: 64}
	var n atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			req.SetRequestURI("http://" + addr + path)
			if key != "" {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			for time.Now().Before(stop) {
				if err := c.Do(req, resp); err != nil || resp.StatusCode() != 200 {
					b.Errorf("%v %d %s", err, resp.StatusCode(), resp.Body())
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / d.Seconds()
}

// BenchmarkMeVersusBare compares GET /api/v1/me (auth, rate limit, request
// log acked by the broker) with a bare fasthttp handler answering the same
// JSON, both over loopback in this process. Run with -benchtime=1x.
func BenchmarkMeVersusBare(b *testing.B) {
	h := ingesttest.Start(b)
	_, key := h.NewWorkspace(b, ingesttest.WorkspaceOpts{Plan: "enterprise", RateMultiplier: 1000000})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	body := []byte(`{"workspace":{"id":"x","name":"y","plan":"pro"},"key":{"id":"k","kind":"api_key","scopes":[],"fullAccess":true}}`)
	bare := &fasthttp.Server{Handler: func(rc *fasthttp.RequestCtx) { rc.SetContentType("application/json"); rc.SetBody(body) }}
	go bare.Serve(ln)
	defer bare.Shutdown()
	meAddr := h.URL[len("http://"):]
	load(b, meAddr, "/api/v1/me", key, time.Second) // warm-up
	for i := 0; i < 3; i++ {
		base := load(b, ln.Addr().String(), "/", "", 5*time.Second)
		me := load(b, meAddr, "/api/v1/me", key, 5*time.Second)
		b.Logf("pair %d: bare %.0f req/s, /api/v1/me %.0f req/s, ratio %.2f", i, base, me, me/base)
	}
}
