package requestlog

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sendstream/deploy/stack"
	"sendstream/pipeline"
	"sendstream/pipeline/pipelinetest"
	"sendstream/schemas"
	"sendstream/sinks/breaker"
	chsink "sendstream/sinks/clickhouse"
)

// TestPublishedEnvelopeBecomesARow runs the stage in the real runner against
// an in-process Kafka-protocol broker and the stack's ClickHouse: a published
// request.logged.v1 envelope is a row within seconds, a duplicate publish
// stays one row, and a malformed envelope goes to the dead-letter topic
// without holding up the others.
func TestPublishedEnvelopeBecomesARow(t *testing.T) {
	conn := testConn(t)
	prefix := stack.TopicPrefix(t)
	brokers := pipelinetest.Cluster(t, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	prod, err := pipeline.NewProducer(ctx, pipeline.ProducerConfig{Brokers: brokers, TopicPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	stages, err := pipeline.SelectStages(Name)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() {
		runErr <- pipeline.Run(runCtx, pipeline.RunConfig{
			Brokers: brokers, TopicPrefix: prefix, Stages: stages,
			Resources: pipeline.Resources{ClickHouse: conn, Publisher: prod},
		})
	}()
	defer func() {
		stopRun()
		if err := <-runErr; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	at := time.Now().UTC().Truncate(time.Second)
	p := full(at, 5)
	good := envelope(t, schemas.NewID(), p)
	bad := envelope(t, schemas.NewID(), p)
	bad.Payload = json.RawMessage(`{"at":"not a time"}`)
	published := time.Now()
	// The duplicate goes in a later publish, as a redelivery would.
	if err := prod.Publish(ctx, schemas.TopicRequestLog, good, bad); err != nil {
		t.Fatal(err)
	}
	if err := prod.Publish(ctx, schemas.TopicRequestLog, good); err != nil {
		t.Fatal(err)
	}

	var rows []chsink.RequestRow
	for {
		rows, err = chsink.QueryRequests(ctx, conn, "ws_1", time.Time{}, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) > 0 {
			break
		}
		if time.Since(published) > 10*time.Second {
			t.Fatal("no request-log row 10 s after publishing")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("row arrived %s after publishing", time.Since(published).Round(time.Millisecond))
	r := rows[0]
	if len(rows) != 1 || r.ID != good.ID || r.Path != p.Path || r.Status != p.Status ||
		r.Recipient != p.Produced.Recipient || !r.At.Equal(at) {
		t.Fatalf("rows = %+v, want one row for %s", rows, good.ID)
	}

	// The malformed envelope is dead-lettered, naming this stage.
	dl := readDeadLetter(ctx, t, brokers, prefix+schemas.TopicDeadLetter)
	if dl.Stage != Name || !dl.Permanent || dl.Envelope == nil || dl.Envelope.ID != bad.ID {
		t.Fatalf("dead letter = %+v, want the malformed envelope %s from %s, permanent", dl, bad.ID, Name)
	}

	// Give the duplicate time to be flushed too, then check it is still one row.
	time.Sleep(2 * time.Second)
	if rows, err = chsink.QueryRequests(ctx, conn, "ws_1", time.Time{}, 10); err != nil || len(rows) != 1 {
		t.Fatalf("after the duplicate: %d rows (err %v), want 1", len(rows), err)
	}
}

func readDeadLetter(ctx context.Context, t *testing.T, brokers []string, topic string) pipeline.DeadLetter {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var m *kgo.Record
	for m == nil {
		fs := cl.PollRecords(ctx, 1)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read dead-letter topic: %v", err)
		}
		if recs := fs.Records(); len(recs) > 0 {
			m = recs[0]
		}
	}
	var env schemas.Envelope
	var dl pipeline.DeadLetter
	if err := json.Unmarshal(m.Value, &env); err != nil {
		t.Fatal(err)
	}
	if env.Type != pipeline.TypeDeadLettered {
		t.Fatalf("dead-letter envelope type %q", env.Type)
	}
	if err := json.Unmarshal(env.Payload, &dl); err != nil {
		t.Fatal(err)
	}
	return dl
}

// TestBreakerOpensWhenClickHouseKeepsFailing: after repeated insert failures
// Flush stops calling ClickHouse and answers with the retryable
// ErrBreakerOpen, keeping the rows buffered.
func TestBreakerOpensWhenClickHouseKeepsFailing(t *testing.T) {
	conn := testConn(t)
	s := newStage(t, conn)
	ctx := context.Background()
	handle(t, s, envelope(t, "b-1", full(time.Now().UTC(), 1)))
	if err := conn.Exec(ctx, "RENAME TABLE request_log TO request_log_away"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := conn.Exec(ctx, "RENAME TABLE request_log_away TO request_log"); err != nil {
			t.Fatal(err)
		}
	}()
	var err error
	for i := 0; i < 10 && !errors.Is(err, breaker.ErrOpen); i++ {
		err = s.Flush(ctx)
		if err == nil {
			t.Fatal("Flush without a table succeeded")
		}
	}
	if !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("after 10 failed flushes: %v, want ErrBreakerOpen", err)
	}
	if s.buf.Len() != 1 {
		t.Fatalf("%d rows buffered, want 1", s.buf.Len())
	}
}
