package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sendstream/deploy/stack"
	"sendstream/ingest/dashboard"
	"sendstream/ingest/events"
	"sendstream/ingest/webhooks"
	"sendstream/pipeline"
	"sendstream/pipeline/pipelinetest"
	"sendstream/schemas"
	"sendstream/sinks/webhook"
	"sendstream/stages/webhookdelivery"
	"sendstream/stages/webhooklog"
)

// hooksSecret stands for the server secret (SENDSTREAM_SECRET) in these
// tests: the dashboard and the delivery stage must share it.
const hooksSecret = "dashboard-webhooks-test-secret-0123456789"

// hooksEnv is one server with the dashboard, sign-in, contacts and public
// events routes over real HTTP, Postgres and ClickHouse, the webhook pages
// built as serve builds them with SENDSTREAM_WEBHOOK_ALLOW_PRIVATE=
// 127.0.0.0/8, and, when stages is set, the webhook delivery stage and the
// two delivery-log stages on the harness's broker, so a message published
// to the deliveries topic reaches a local receiver and the log.
type hooksEnv struct {
	*env
	ch        driver.Conn
	endpoints *webhook.EndpointStore
}

func startHooks(t *testing.T, stages bool) *hooksEnv {
	t.Helper()
	pg := stack.PG(t)
	ch := stack.CH(t)
	hooks, err := webhooks.NewEndpoints(pg, webhooks.AdminSettings{Secret: hooksSecret,
		AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if err != nil {
		t.Fatal(err)
	}
	es, err := events.NewStore(pg, events.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(es.Close)
	// The harness's producer is made inside serveDashboard; the dashboard
	// gets it through this indirection.
	pub := &latePublisher{}
	e := serveDashboard(t, dashboard.Deps{Webhooks: hooks, ClickHouse: ch, Publisher: pub}, nil, events.Routes(events.Deps{Store: es})...)
	h := e.h
	pub.set(h.Publisher)
	if stages {
		run, err := pipeline.SelectStages(webhookdelivery.Name, webhooklog.Name, webhooklog.BodiesName)
		if err != nil {
			t.Fatal(err)
		}
		settings := map[string]string{"secret": hooksSecret, "webhook_allow_private": "127.0.0.0/8", "webhook_insecure_tls": "1",
			"topic_prefix": "dash" + strings.ToLower(schemas.NewID())} // a retry queue of its own
		pipelinetest.Start(context.Background(), t, "webhook stages", pipeline.RunConfig{
			Brokers: h.Brokers, Stages: run, Resources: pipeline.Resources{Postgres: pg, ClickHouse: ch, Publisher: h.Publisher, Settings: settings},
			BackoffBase: 50 * time.Millisecond, BackoffMax: 300 * time.Millisecond, FlushInterval: 100 * time.Millisecond,
			MaxWait: 50 * time.Millisecond, SessionTimeout: 6 * time.Second, HeartbeatInterval: 500 * time.Millisecond,
			JoinGroupBackoff: 100 * time.Millisecond,
		})
	}
	return &hooksEnv{env: e, ch: ch, endpoints: hooks.Store()}
}

// latePublisher forwards to a publisher set after it was handed out.
type latePublisher struct {
	mu sync.Mutex
	p  pipeline.Publisher
}

func (l *latePublisher) set(p pipeline.Publisher) { l.mu.Lock(); l.p = p; l.mu.Unlock() }

func (l *latePublisher) Publish(ctx context.Context, topic string, envs ...schemas.Envelope) error {
	l.mu.Lock()
	p := l.p
	l.mu.Unlock()
	return p.Publish(ctx, topic, envs...)
}

// track posts one event to /api/public/events with a tracking token, as a
// website's script does, and returns the status.
func (e *hooksEnv) track(token string) int {
	e.t.Helper()
	req, err := http.NewRequest("POST", e.h.URL+"/api/public/events", strings.NewReader(`{"event":"page_viewed"}`))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, _ := e.send(req)
	return resp.StatusCode
}

// received is one request a receiver got.
type received struct {
	header http.Header
	body   []byte
}

// receiver is an https server on 127.0.0.1 (self-signed: the stage runs
// with webhook_insecure_tls) that answers 204 and hands each request to
// the returned channel.
func receiver(t *testing.T) (string, chan received) {
	t.Helper()
	got := make(chan received, 16)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- received{header: r.Header.Clone(), body: b}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/hooks", got
}

// eventuallyTrue polls cond every 10 ms for up to ten seconds.
func eventuallyTrue(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}
