package transactional_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"sendstream/ingest/ingesttest"
	"sendstream/ingest/transactional"
	"sendstream/schemas"
)

// BenchmarkEndToEnd sends b.N messages over HTTP (16 senders) to the
// in-process server and waits until the SMTP server has them all: a tool to
// profile the send and delivery paths together (go test -run - -bench
// EndToEnd -cpuprofile cpu.out). bench/transactional.go is the measured
// benchmark.
func BenchmarkEndToEnd(b *testing.B) {
	e := newEnv(b, envOpts{smtpQuery: "&pool=16"})
	rich := int64(1000000)
	_, key := e.workspace(ingesttest.WorkspaceOpts{Plan: "enterprise", RateMultiplier: rich})
	html := `<html><body><h1>Hi {{ name }}</h1><p>Order <b>{{ order.number }}</b> on {{ order.date }}.</p><table>{% for i in order.items %}<tr><td>{{ forloop.index }}. {{ i.name }}</td><td>{{ i.quantity }} x {{ i.price }}</td></tr>{% endfor %}</table>` +
		string(bytes.Repeat([]byte("<p>Thanks for shopping with us; we will let you know when it ships.</p>\n"), 20)) + `</body></html>`
	var n atomic.Int64
	before := len(e.smtp.Messages())
	b.ResetTimer()
	start := time.Now()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			body, _ := json.Marshal(map[string]any{
				"to": fmt.Sprintf("u%d@bench.example.com", i), "subject": "Order {{ order.number }}", "htmlContent": html,
				"data": map[string]any{"name": "Ada", "order": map[string]any{"number": i, "date": "2025-01-02",
					"items": []any{map[string]any{"name": "Tea", "quantity": 2, "price": "12.50"}, map[string]any{"name": "Pot <blue>", "quantity": 1, "price": "49.00"}}}}})
			// Straight HTTP: the harness's OpenAPI check would dominate.
			req, _ := http.NewRequest("POST", e.h.URL+"/api/v1/transactional/send", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := e.h.Client.Do(req)
			if err != nil {
				b.Error(err)
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 201 {
				b.Errorf("send: %d", resp.StatusCode)
			}
		}
	})
	accepted := time.Since(start)
	got := e.smtp.Wait(before+b.N, 5*time.Minute)
	total := time.Since(start)
	b.StopTimer()
	if len(got)-before != b.N {
		b.Fatalf("%d of %d delivered", len(got)-before, b.N)
	}
	b.ReportMetric(float64(b.N)/accepted.Seconds(), "accepted/s")
	b.ReportMetric(float64(b.N)/total.Seconds(), "delivered/s")
	if len(got) > 0 {
		b.ReportMetric(float64(len(got[len(got)-1].Data)), "bytes/msg")
	}
}

// BenchmarkDelivery stores and publishes b.N messages, then runs the
// delivery stage and waits until the SMTP server has them all: the delivery
// path alone, for profiling (go test -run - -bench Delivery -cpuprofile).
func BenchmarkDelivery(b *testing.B) {
	e := newEnv(b, envOpts{noStages: true, smtpQuery: "&pool=16"})
	ws, _ := e.workspace(ingesttest.WorkspaceOpts{})
	html := `<html><body><h1>Hi {{ name }}</h1><p>Order <b>{{ order.number }}</b> on {{ order.date }}.</p><table>{% for i in order.items %}<tr><td>{{ forloop.index }}. {{ i.name }}</td><td>{{ i.quantity }} x {{ i.price }}</td></tr>{% endfor %}</table>` +
		string(bytes.Repeat([]byte("<p>Thanks for shopping with us; we will let you know when it ships.</p>\n"), 20)) + `</body></html>`
	data := json.RawMessage(`{"name":"Ada","order":{"number":"100001","date":"2025-01-02","items":[{"name":"Tea","quantity":2,"price":"12.50"},{"name":"Pot <blue>","quantity":1,"price":"49.00"}]}}`)
	policy := transactional.BuiltinPolicy(ws)
	ctx := context.Background()
	var envs []schemas.Envelope
	for i := 0; i < b.N; i++ {
		id := schemas.NewID()
		to := fmt.Sprintf("d%d@bench.example.com", i)
		if _, ok, _, err := e.store.Claim(ctx, transactional.NewMessage{ID: id, Workspace: ws, To: to, RFCMessageID: id + "@sendstream.local", PolicyID: policy.ID, Provider: "smtp"}); err != nil || !ok {
			b.Fatal(err)
		}
		p, _ := json.Marshal(schemas.SendPayload{MessageID: id, RFCMessageID: id + "@sendstream.local", To: to, From: schemas.Address{Email: "noreply@sendstream.local"},
			Policy: schemas.PolicyRef{ID: policy.ID, Key: policy.Key, Kind: policy.Kind, Provider: "smtp"}, Subject: "Order {{ order.number }}", HTML: html, Data: data, AcceptedAt: time.Now()})
		envs = append(envs, schemas.Envelope{ID: id, Workspace: ws, Type: schemas.TypeTransactionalSend, Key: ws + ":" + id, OccurredAt: time.Now(), Payload: p})
	}
	for i := 0; i < len(envs); i += 500 {
		if err := e.h.Publisher.Publish(ctx, schemas.TopicTransactional, envs[i:min(i+500, len(envs))]...); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	start := time.Now()
	e.ch = nil
	e.runStages()
	got := e.smtp.Wait(b.N, 10*time.Minute)
	d := time.Since(start)
	b.StopTimer()
	if len(got) != b.N {
		b.Fatalf("%d of %d delivered", len(got), b.N)
	}
	b.ReportMetric(float64(b.N)/d.Seconds(), "delivered/s")
}
