package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"sendstream/ingest/auth"
	"sendstream/schemas"
)

// recPublisher records publishes and fails those to topics in fail.
type recPublisher struct {
	mu   sync.Mutex
	got  map[string][]schemas.Envelope
	fail map[string]bool
}

func (p *recPublisher) Publish(_ context.Context, topic string, envs ...schemas.Envelope) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail[topic] {
		return errors.New("broker down")
	}
	if p.got == nil {
		p.got = map[string][]schemas.Envelope{}
	}
	p.got[topic] = append(p.got[topic], envs...)
	return nil
}

func (p *recPublisher) count(topic string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.got[topic])
}

func do(s *Server, method, path, key, body string) (int, []byte) {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(path)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.SetBodyString(body)
		req.Header.SetContentType("application/json")
	}
	var rc fasthttp.RequestCtx
	rc.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil)
	s.handle(&rc)
	return rc.Response.StatusCode(), append([]byte(nil), rc.Response.Body()...)
}

func TestPublishFailureAnswers503AndPanicsAnswer500(t *testing.T) {
	key := "ss_live_" + "0123456789012345678901234567890123456789"
	pub := &recPublisher{fail: map[string]bool{schemas.TopicEvents: true}}
	s, err := New(Config{}, Deps{Auth: oneKey{auth.Hash(key)}, Publisher: pub, Metrics: prometheus.NewRegistry(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.Add(
		Route{Method: "POST", Path: "/api/v1/x", Credential: CredKey, Logged: true, Handle: func(c *Call) Result {
			r := OK(202, map[string]string{"id": "1"})
			r.Publish = []Message{{Topic: schemas.TopicEvents, Env: schemas.Envelope{ID: "e1", Workspace: "w1", Payload: json.RawMessage(`{}`)}}}
			return r
		}},
		Route{Method: "GET", Path: "/api/v1/panic", Credential: CredKey, Logged: true, Handle: func(*Call) Result { panic("boom") }},
	)
	s.start.Do(func() { s.bg.Add(2); go s.sweepLoop(); go s.logLoop() })
	defer s.Shutdown(context.Background())

	st, b := do(s, "POST", "/api/v1/x", key, `{}`)
	var e ErrorBody
	_ = json.Unmarshal(b, &e)
	if st != 503 || e.Code != "unavailable" {
		t.Fatalf("publish failure: %d %s", st, b)
	}
	st, b = do(s, "GET", "/api/v1/panic", key, "")
	if st != 500 {
		t.Fatalf("panic: %d %s", st, b)
	}
	// Both non-2xx records arrive in the background: the 503 one replaces
	// the 202 record under the same id.
	deadline := time.Now().Add(5 * time.Second)
	for pub.count(schemas.TopicRequestLog) < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	pub.mu.Lock()
	defer pub.mu.Unlock()
	logs := pub.got[schemas.TopicRequestLog]
	if len(logs) != 3 || logs[0].ID != logs[1].ID {
		t.Fatalf("request-log records: %d %+v", len(logs), logs)
	}
	statuses := map[int]bool{}
	for _, l := range logs {
		var rl schemas.RequestLog
		_ = json.Unmarshal(l.Payload, &rl)
		statuses[rl.Status] = true
	}
	if !statuses[202] || !statuses[503] || !statuses[500] {
		t.Fatalf("statuses logged: %v", statuses)
	}
}
