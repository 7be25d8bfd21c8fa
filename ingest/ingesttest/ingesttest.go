// Package ingesttest runs the real ingest server for integration tests: real
// Postgres (the local stack, migrations applied), a real Kafka-protocol
// broker (an in-process kfake cluster) behind the real group-commit
// producer, and real HTTP over loopback. Every response of a route that the
// OpenAPI document describes is validated against it; a mismatch fails the
// test.
package ingesttest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"sendstream/deploy/stack"
	"sendstream/ingest"
	"sendstream/ingest/auth"
	"sendstream/pipeline"
	"sendstream/schemas"
)

// Options tune Start. Zero values take the defaults.
type Options struct {
	// Config of the server; SiteURL is set to the harness URL.
	Config ingest.Config
	// Logger for the server (default: discards below Warn).
	Logger *slog.Logger
	// Sessions resolves session cookies (members.Store); nil refuses them.
	Sessions ingest.SessionResolver
}

// Harness is one running server and the stores behind it.
type Harness struct {
	URL       string // http://127.0.0.1:port (the site URL)
	PG        *pgxpool.Pool
	Brokers   []string
	Publisher *pipeline.Producer
	Server    *ingest.Server
	Store     *auth.Store
	Client    *http.Client

	t      testing.TB
	routes []ingest.Route
}

// Start runs a server with the given feature routes (plus the core routes
// every server has) on 127.0.0.1:0 and stops it when the test ends.
func Start(t testing.TB, routes ...ingest.Route) *Harness {
	t.Helper()
	return StartWith(t, Options{}, routes...)
}

// StartWith is Start with options.
func StartWith(t testing.TB, opt Options, routes ...ingest.Route) *Harness {
	t.Helper()
	pg := stack.PG(t)
	cluster, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(4),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(pipeline.BrokerMessageMaxBytes)}),
		kfake.SeedTopics(4, schemas.AllTopics...),
	)
	if err != nil {
		t.Fatalf("ingesttest: start kfake: %v", err)
	}
	t.Cleanup(cluster.Close)
	brokers := cluster.ListenAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	prod, err := pipeline.NewProducer(ctx, pipeline.ProducerConfig{
		Brokers: brokers, AutoCreatePartitions: 4, Metrics: prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatalf("ingesttest: producer: %v", err)
	}
	t.Cleanup(func() { _ = prod.Close() })
	h := &Harness{PG: pg, Brokers: brokers, Publisher: prod, Store: auth.NewStore(pg), t: t, routes: routes}
	h.Client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	t.Cleanup(h.Client.CloseIdleConnections)
	h.Server, h.URL = h.serve(t, opt)
	return h
}

// Second starts another server (its own process-local caches and limiter
// state) on the same Postgres and broker, as a second replica would be; its
// Harness shares everything else with h.
func (h *Harness) Second(t testing.TB, opt Options) *Harness {
	t.Helper()
	h2 := *h
	h2.t = t
	h2.Server, h2.URL = h.serve(t, opt)
	return &h2
}

func (h *Harness) serve(t testing.TB, opt Options) (*ingest.Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("ingesttest: listen: %v", err)
	}
	url := "http://" + ln.Addr().String()
	cfg := opt.Config
	cfg.SiteURL = url
	logger := opt.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	srv, err := ingest.New(cfg, ingest.Deps{
		PG: h.PG, Publisher: h.Publisher, Logger: logger, Metrics: prometheus.NewRegistry(), Sessions: opt.Sessions,
		Ready: func(ctx context.Context) error { return h.PG.Ping(ctx) },
	})
	if err != nil {
		t.Fatalf("ingesttest: ingest.New: %v", err)
	}
	srv.Add(h.routes...)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("ingesttest: shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("ingesttest: serve: %v", err)
		}
	})
	return srv, url
}

// WorkspaceOpts describe a test workspace. Zero values: a unique name, the
// free plan, the plan's limits.
type WorkspaceOpts struct {
	Name           string
	Plan           string
	ContactLimit   *int64
	RateMultiplier int64
	// Scopes, when set, makes NewWorkspace return a second key with exactly
	// these scopes instead of the full-access one.
	Scopes []string
}

// NewWorkspace creates a workspace and returns its id and an API key.
func (h *Harness) NewWorkspace(t testing.TB, o WorkspaceOpts) (workspaceID, apiKey string) {
	t.Helper()
	if o.Name == "" {
		o.Name = "test " + schemas.NewID()[20:]
	}
	ctx := context.Background()
	ws, key, err := h.Store.CreateWorkspace(ctx, auth.NewWorkspace{Name: o.Name, Plan: o.Plan, ContactLimit: o.ContactLimit, RateMultiplier: o.RateMultiplier})
	if err != nil {
		t.Fatalf("ingesttest: %v", err)
	}
	if len(o.Scopes) > 0 {
		if _, key, err = h.Store.CreateAPIKey(ctx, ws, "scoped", o.Scopes, nil); err != nil {
			t.Fatalf("ingesttest: %v", err)
		}
	}
	return ws, key
}

// Do sends one request and returns the status and body. key "" sends no
// Authorization header. body may be nil, []byte or string (sent as is), or
// any other value (JSON-encoded); a body is sent as application/json.
func (h *Harness) Do(method, path, key string, body any) (int, []byte) {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			h.t.Fatalf("ingesttest: encode body: %v", err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, h.URL+path, rd)
	if err != nil {
		h.t.Fatalf("ingesttest: %v", err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, data := h.DoRequest(req)
	return resp.StatusCode, data
}

// DoRequest sends a prepared request, validates the answer against the
// OpenAPI document and returns it with its body read.
func (h *Harness) DoRequest(req *http.Request) (*http.Response, []byte) {
	h.t.Helper()
	resp, err := h.Client.Do(req)
	if err != nil {
		h.t.Fatalf("ingesttest: %s %s: %v", req.Method, req.URL.Path, err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		h.t.Fatalf("ingesttest: read %s %s: %v", req.Method, req.URL.Path, err)
	}
	if msg := ValidateResponse(req, resp, data); msg != "" {
		h.t.Errorf("ingesttest: %s %s answered %d %s, which the OpenAPI document does not allow:\n%s", req.Method, req.URL.Path, resp.StatusCode, data, msg)
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	return resp, data
}

// Consume returns every envelope published to topic (a schemas.Topic
// constant) up to now, partition by partition. Publishes that a 2xx answered
// are always there; request-log records of other answers are published in
// the background, so wait for those with ConsumeUntil.
func (h *Harness) Consume(t testing.TB, topic string) []schemas.Envelope {
	t.Helper()
	cl := h.consumer(t, topic)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ends, err := endOffsets(ctx, cl, topic)
	if err != nil {
		t.Fatalf("ingesttest: end offsets of %s: %v", topic, err)
	}
	var out []schemas.Envelope
	next := map[int32]int64{}
	pending := func() bool {
		for p, end := range ends {
			if next[p] < end {
				return true
			}
		}
		return false
	}
	for pending() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("ingesttest: consume %s: timed out (have %v of %v)", topic, next, ends)
		}
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			if end, ok := ends[r.Partition]; ok && r.Offset < end {
				out = append(out, decodeEnv(t, topic, r.Value))
			}
		})
	}
	return out
}

// ConsumeUntil calls Consume until done(envelopes) is true or timeout
// passes, and returns the last read.
func (h *Harness) ConsumeUntil(t testing.TB, topic string, timeout time.Duration, done func([]schemas.Envelope) bool) []schemas.Envelope {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out := h.Consume(t, topic)
		if done(out) || time.Now().After(deadline) {
			return out
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (h *Harness) consumer(t testing.TB, topic string) *kgo.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.Brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("ingesttest: consumer: %v", err)
	}
	return cl
}

// endOffsets returns each partition's high watermark.
func endOffsets(ctx context.Context, cl *kgo.Client, topic string) (map[int32]int64, error) {
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	for _, t := range mresp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return nil, err
		}
		for _, p := range t.Partitions {
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Partition = p.Partition
			lp.Timestamp = -1 // latest
			lt.Partitions = append(lt.Partitions, lp)
		}
	}
	req.Topics = append(req.Topics, lt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	ends := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, err
			}
			if p.Offset > 0 {
				ends[p.Partition] = p.Offset
			}
		}
	}
	return ends, nil
}

func decodeEnv(t testing.TB, topic string, v []byte) schemas.Envelope {
	var env schemas.Envelope
	if err := json.Unmarshal(v, &env); err != nil {
		t.Errorf("ingesttest: %s: record is not an envelope: %v", topic, err)
	}
	return env
}

// RequestLogs returns the request-log records published for a workspace.
func (h *Harness) RequestLogs(t testing.TB, workspace string) []schemas.RequestLog {
	t.Helper()
	var out []schemas.RequestLog
	for _, env := range h.Consume(t, schemas.TopicRequestLog) {
		if env.Workspace != workspace {
			continue
		}
		var rl schemas.RequestLog
		if err := json.Unmarshal(env.Payload, &rl); err != nil {
			t.Fatalf("ingesttest: request-log payload: %v", err)
		}
		out = append(out, rl)
	}
	return out
}

var (
	docOnce sync.Once
	docErr  error
	docVal  *openapiValidator
)

// ValidateResponse checks one answer against the OpenAPI document when the
// document describes the request's path and method; it returns "" when the
// answer conforms or is not described, else what is wrong.
func ValidateResponse(req *http.Request, resp *http.Response, body []byte) string {
	docOnce.Do(func() { docVal, docErr = newOpenAPIValidator() })
	if docErr != nil {
		return fmt.Sprintf("the OpenAPI document does not load: %v", docErr)
	}
	return docVal.validate(req, resp, body)
}

// AwayFromMinuteEnd waits for the next minute when fewer than need remain
// in the current one, so a test's calls all fall in one rate-limit window
// (limits count per calendar minute).
func AwayFromMinuteEnd(t testing.TB, need time.Duration) {
	t.Helper()
	if left := time.Minute - time.Duration(time.Now().UnixNano()%int64(time.Minute)); left < need {
		t.Logf("waiting %v for the next minute", left)
		time.Sleep(left + 100*time.Millisecond)
	}
}
