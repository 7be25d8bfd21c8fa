package webhookdelivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sendstream/deploy/stack"
	"sendstream/ingest/ingesttest"
	"sendstream/pipeline"
	"sendstream/pipeline/pipelinetest"
	"sendstream/schemas"
	"sendstream/sinks/webhook/webhooktest"
	"sendstream/stages/webhookdelivery"
	"sendstream/stages/webhookfanout"
)

// TestHangingEndpointSlowsNoOther (issue 25 item 7): 50 REST hooks, one
// of whose receivers hangs on every call (10 s, past the end of the test),
// each get 20 deliveries through the real runner, with a per-target bound
// of 4 and an in-flight budget (MaxInFlight 32) smaller than the hanging
// target's backlog. The other 49 receive every delivery while the hanging
// one is stuck; the hanging receiver never has more than 4 calls at once;
// and the runner's committed offsets reach the end of what was published:
// the hanging target's backlog is deferred to River, not held in flight,
// so it blocks neither its partitions nor fetching. (Held in flight, as
// when deliveries were keyed by target, its 20 envelopes fill the 32 of
// the budget with the others queued behind them.)
func TestHangingEndpointSlowsNoOther(t *testing.T) {
	const targets, perTarget, each = 50, 4, 20
	pg := pgFor(t)
	ws := workspace(t, pg)

	var mu sync.Mutex
	got := map[string]map[string]int{} // target path → message → calls
	fast := webhooktest.NewReceiver(t, false, func(w http.ResponseWriter, r *http.Request) {
		var b struct{ ID string }
		_ = json.NewDecoder(r.Body).Decode(&b)
		mu.Lock()
		if got[r.URL.Path] == nil {
			got[r.URL.Path] = map[string]int{}
		}
		got[r.URL.Path][b.ID]++
		mu.Unlock()
		w.WriteHeader(204)
	})
	release := make(chan struct{})
	var hangNow, hangMax, hangCalls atomic.Int64
	slow := webhooktest.NewReceiver(t, false, func(w http.ResponseWriter, r *http.Request) {
		n := hangNow.Add(1)
		defer hangNow.Add(-1)
		hangCalls.Add(1)
		for {
			m := hangMax.Load()
			if n <= m || hangMax.CompareAndSwap(m, n) {
				break
			}
		}
		select {
		case <-release:
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		w.WriteHeader(500)
	})
	var once sync.Once
	unhang := func() { once.Do(func() { close(release) }) }
	defer unhang()

	subs := make([]string, targets)
	urls := make([]string, targets)
	for i := range subs {
		urls[i] = fmt.Sprintf("%s/t%d", fast.URL, i)
		if i == 0 {
			urls[i] = slow.URL + "/hang"
		}
		subs[i] = ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", urls[i])
	}

	prefix := stack.TopicPrefix(t)
	brokers := pipelinetest.Cluster(t, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prod, err := pipeline.NewProducer(ctx, pipeline.ProducerConfig{Brokers: brokers, TopicPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	queue := "test_" + schemas.NewID()
	t.Cleanup(func() { _, _ = pg.Exec(context.Background(), `DELETE FROM river_job WHERE queue = $1`, queue) })
	sched, err := webhookdelivery.StartScheduler(ctx, pg, prod, webhookdelivery.SchedulerConfig{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	st := newStage(t, pg, webhookdelivery.Config{AllowPrivate: loopback, PerTarget: perTarget, Deferral: time.Second}, nil, sched)
	name := "webhookdelivery-isolation-" + schemas.NewID()
	reg := pipeline.Registered{Name: name, Consumes: schemas.TopicWebhookDeliveries, Produces: []string{schemas.TopicWebhookAttempts},
		Concurrency: 512, MaxInFlight: 32, Build: func(context.Context, pipeline.Resources) (pipeline.Stage, error) { return st, nil }}

	var envs []schemas.Envelope
	for i, sub := range subs {
		for range each {
			env := delivery(t, ws, schemas.WebhookTargetSubscription, sub, urls[i], 1)
			var d schemas.WebhookDelivery
			_ = json.Unmarshal(env.Payload, &d)
			env.Key = webhookfanout.DeliveryKey(ws, sub, d.MessageID)
			envs = append(envs, env)
		}
	}
	// The hanging target's deliveries first: they are fetched before the
	// others.
	if err := prod.Publish(ctx, schemas.TopicWebhookDeliveries, envs...); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(mustClient(t, brokers))
	ends, err := adm.ListEndOffsets(ctx, prefix+schemas.TopicWebhookDeliveries)
	if err != nil {
		t.Fatal(err)
	}

	runCtx, stopRun := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() {
		runErr <- pipeline.Run(runCtx, pipeline.RunConfig{Brokers: brokers, TopicPrefix: prefix, Stages: []pipeline.Registered{reg},
			Resources: pipeline.Resources{Postgres: pg, Publisher: prod}})
	}()
	defer func() {
		unhang() // the drain does not wait out the hanging calls
		stopRun()
		if err := <-runErr; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	// Every delivery of the 49 arrives.
	for {
		mu.Lock()
		complete := 0
		for i := 1; i < targets; i++ {
			if len(got["/t"+fmt.Sprint(i)]) == each {
				complete++
			}
		}
		mu.Unlock()
		if complete == targets-1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d fast targets received all %d deliveries", complete, targets-1, each)
		case <-time.After(50 * time.Millisecond):
		}
	}
	// The committed offsets reach the end of what was published.
	group := pipeline.GroupID(name)
	for {
		offs, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			behind := 0
			ends.Each(func(e kadm.ListedOffset) {
				o, ok := offs.Lookup(e.Topic, e.Partition)
				if !ok || o.At < e.Offset {
					behind++
				}
			})
			if behind == 0 {
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the committed offsets of %s never reached the published end: %v", group, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if hangCalls.Load() == 0 {
		t.Fatal("the hanging receiver was never called")
	}
	if m := hangMax.Load(); m > perTarget {
		t.Errorf("the hanging receiver had %d calls at once, want at most %d", m, perTarget)
	}
	mu.Lock()
	defer mu.Unlock()
	for path, msgs := range got {
		for id, n := range msgs {
			if n != 1 {
				t.Errorf("%s received message %s %d times", path, id, n)
			}
		}
	}
}

// mustClient returns a franz-go client of brokers, closed when the test
// ends.
func mustClient(t *testing.T, brokers []string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
