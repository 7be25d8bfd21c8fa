package webhooklog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"sendstream/deploy/admincli"
	"sendstream/deploy/stack"
	"sendstream/pipeline"
	"sendstream/schemas"
	whlog "sendstream/sinks/webhooklog"
	"sendstream/stages/webhooklog"
)

// admin runs `sendstream admin args…` with the package's commands on ch
// and, when opener is set, a producer; it returns the JSON printed.
func admin(t *testing.T, ch driver.Conn, opener func(context.Context) (io.Closer, error), args ...string) (string, error) {
	t.Helper()
	env := admincli.NewEnv(
		func(context.Context) (*pgxpool.Pool, error) { return nil, fmt.Errorf("no Postgres in this test") },
		func(context.Context) (driver.Conn, error) { return noClose{ch}, nil })
	if opener != nil {
		env.WithPublisher(opener)
	}
	var out, errOut bytes.Buffer
	err := admincli.Run(context.Background(), webhooklog.AdminCommands(), env, args, &out, &errOut)
	return out.String(), err
}

// TestAdminDeliveriesFilters: `admin webhook deliveries` lists a
// workspace's attempts newest first, by endpoint, event type and outcome
// class (ok: outcome ok; failed: every other outcome), at most --limit, 50
// by default.
func TestAdminDeliveriesFilters(t *testing.T) {
	ch := stack.CH(t)
	ctx := context.Background()
	st, err := webhooklog.New(ctx, pipeline.Resources{ClickHouse: ch}, webhooklog.Name)
	if err != nil {
		t.Fatal(err)
	}
	ws := "ws-" + schemas.NewID()
	t0 := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	next := t0.Add(time.Second)
	rows := []schemas.WebhookAttempt{
		{MessageID: "m1", Event: "CONTACT_CREATED", TargetKind: "endpoint", TargetID: "ep1", Attempt: 1, Outcome: "retry", StatusCode: 503, NextAttemptAt: &next, At: t0},
		{MessageID: "m1", Event: "CONTACT_CREATED", TargetKind: "endpoint", TargetID: "ep1", Attempt: 2, Outcome: "ok", StatusCode: 200, At: t0.Add(1 * time.Second)},
		{MessageID: "m2", Event: "CONTACT_UPDATED", TargetKind: "endpoint", TargetID: "ep2", Attempt: 1, Outcome: "throttled", StatusCode: 429, At: t0.Add(2 * time.Second)},
		{MessageID: "m3", Event: "CONTACT_CREATED", TargetKind: "subscription", TargetID: "sub1", Attempt: 1, Outcome: "failed", Error: "timeout", At: t0.Add(3 * time.Second)},
		{MessageID: "m4", Event: "CONTACT_CREATED", TargetKind: "endpoint", TargetID: "ep2", Attempt: 1, Outcome: "skipped", At: t0.Add(4 * time.Second)},
	}
	for _, r := range rows {
		if _, err := st.Handle(ctx, attemptEnv(t, ws, r)); err != nil {
			t.Fatal(err)
		}
	}
	// A workspace of 60 attempts, for the default limit.
	many := ws + "-many"
	for i := range 60 {
		a := schemas.WebhookAttempt{MessageID: fmt.Sprintf("n%02d", i), Event: "CONTACT_CREATED", TargetKind: "endpoint", TargetID: "ep1",
			Attempt: 1, Outcome: "ok", StatusCode: 204, At: t0.Add(time.Duration(i) * time.Second)}
		if _, err := st.Handle(ctx, attemptEnv(t, many, a)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	list := func(args ...string) string {
		t.Helper()
		out, err := admin(t, ch, nil, append([]string{"webhook", "deliveries"}, args...)...)
		if err != nil {
			t.Fatalf("deliveries %v: %v", args, err)
		}
		var got struct{ Deliveries []whlog.Delivery }
		if err := json.Unmarshal([]byte(out), &got); err != nil || got.Deliveries == nil {
			t.Fatalf("deliveries %v: %q: %v", args, out, err)
		}
		var ids []string
		for _, d := range got.Deliveries {
			ids = append(ids, fmt.Sprintf("%s/%s#%d", d.MessageID, d.TargetID, d.Attempt))
		}
		return strings.Join(ids, " ")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "m4/ep2#1 m3/sub1#1 m2/ep2#1 m1/ep1#2 m1/ep1#1"},
		{[]string{"--endpoint", "ep1"}, "m1/ep1#2 m1/ep1#1"},
		{[]string{"--endpoint", "sub1"}, "m3/sub1#1"},
		{[]string{"--event", "CONTACT_UPDATED"}, "m2/ep2#1"},
		{[]string{"--status", "ok"}, "m1/ep1#2"},
		{[]string{"--status", "failed"}, "m4/ep2#1 m3/sub1#1 m2/ep2#1 m1/ep1#1"},
		{[]string{"--endpoint", "ep2", "--event", "CONTACT_CREATED", "--status", "failed"}, "m4/ep2#1"},
		{[]string{"--endpoint", "ep1", "--status", "failed"}, "m1/ep1#1"},
		{[]string{"--limit", "2"}, "m4/ep2#1 m3/sub1#1"},
		{[]string{"--endpoint", "nope"}, ""},
	} {
		if got := list(append([]string{"--workspace", ws}, c.args...)...); got != c.want {
			t.Errorf("deliveries %v = %q, want %q", c.args, got, c.want)
		}
	}
	if got := strings.Fields(list("--workspace", many)); len(got) != 50 || got[0] != "n59/ep1#1" || got[49] != "n10/ep1#1" {
		t.Errorf("default limit: %d rows, %v … %v; want the newest 50", len(got), got[:1], got[len(got)-1:])
	}
	if got := strings.Fields(list("--workspace", many, "--limit", "55")); len(got) != 55 {
		t.Errorf("--limit 55: %d rows", len(got))
	}

	// Every field of an attempt reaches the output.
	out, err := admin(t, ch, nil, "webhook", "deliveries", "--workspace", ws, "--endpoint", "ep1", "--status", "failed")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"targetKind":"endpoint"`, `"statusCode":503`, `"outcome":"retry"`, `"nextAttemptAt":"2026-05-06T07:08:10Z"`,
		`"at":"2026-05-06T07:08:09Z"`, `"event":"CONTACT_CREATED"`, `"replay":false`} {
		if !strings.Contains(out, want) {
			t.Errorf("output %s lacks %s", out, want)
		}
	}
	for _, bad := range [][]string{{"--workspace", ws, "--status", "retry"}, {"--workspace", ws, "--limit", "0"}, {"--endpoint", "ep1"}} {
		if _, err := admin(t, ch, nil, append([]string{"webhook", "deliveries"}, bad...)...); err == nil {
			t.Errorf("deliveries %v: want an error", bad)
		}
	}
}

// TestAdminReplay: `admin webhook replay` publishes each selected message
// again to the deliveries topic, with the same message id and body, Replay
// set and the attempt number after the highest one published or logged;
// --message
// picks every target the message went to, --endpoint with --since every
// message of that target whose first attempt was due since then.
func TestAdminReplay(t *testing.T) {
	e := stack.ForTest(t)
	ch := stack.CH(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := webhooklog.New(ctx, pipeline.Resources{ClickHouse: ch}, webhooklog.BodiesName)
	if err != nil {
		t.Fatal(err)
	}
	ws := "ws-" + schemas.NewID()
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	body := func(id string) []byte {
		return []byte(`{"id":"` + id + `","event":"CONTACT_CREATED","timestamp":"2026-06-01T12:00:00Z","teamId":"` + ws + `","data":{"email":"<a&b>@x.test"}}`)
	}
	deliver := func(msg, kind, target string, attempt int, first time.Time) {
		d := schemas.WebhookDelivery{MessageID: msg, Event: "CONTACT_CREATED", TargetKind: kind, TargetID: target,
			URL: "https://hooks.example/" + target, Attempt: attempt, FirstAt: first, Body: body(msg)}
		if _, err := st.Handle(ctx, deliveryEnv(t, ws, d)); err != nil {
			t.Fatal(err)
		}
	}
	for a := 1; a <= 3; a++ {
		deliver("m1", "endpoint", "ep1", a, t0)
	}
	deliver("m1", "subscription", "sub1", 1, t0)
	deliver("m2", "endpoint", "ep1", 1, t0.Add(time.Hour))
	deliver("m0", "endpoint", "ep1", 1, t0.Add(-time.Hour))
	deliver("m3", "endpoint", "ep2", 1, t0.Add(time.Hour))
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// sub1's one delivery envelope made three quick attempts: the log is
	// ahead of the bodies, and the replay continues after attempt 3.
	logSt, err := webhooklog.New(ctx, pipeline.Resources{ClickHouse: ch}, webhooklog.Name)
	if err != nil {
		t.Fatal(err)
	}
	for a := 1; a <= 3; a++ {
		if _, err := logSt.Handle(ctx, attemptEnv(t, ws, schemas.WebhookAttempt{MessageID: "m1", Event: "CONTACT_CREATED", TargetKind: "subscription",
			TargetID: "sub1", Attempt: a, Outcome: "retry", StatusCode: 500, At: t0.Add(time.Duration(a) * time.Second)})); err != nil {
			t.Fatal(err)
		}
	}
	if err := logSt.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	prefix := stack.TopicPrefix(t)
	opened := 0
	opener := func(ctx context.Context) (io.Closer, error) {
		opened++
		p, err := pipeline.NewProducer(ctx, pipeline.ProducerConfig{Brokers: e.Brokers(), TopicPrefix: prefix})
		if err != nil {
			return nil, err
		}
		if err := p.EnsureTopics(ctx, schemas.AllTopics, 4); err != nil {
			p.Close()
			return nil, err
		}
		return p, nil
	}
	replay := func(args ...string) int {
		t.Helper()
		out, err := admin(t, ch, opener, append([]string{"webhook", "replay", "--workspace", ws}, args...)...)
		if err != nil {
			t.Fatalf("replay %v: %v", args, err)
		}
		var got struct{ Replayed *int }
		if err := json.Unmarshal([]byte(out), &got); err != nil || got.Replayed == nil {
			t.Fatalf("replay %v: %q: %v", args, out, err)
		}
		return *got.Replayed
	}

	if n := replay("--message", "m1"); n != 2 {
		t.Fatalf("replay --message m1: %d, want 2 (ep1 and sub1)", n)
	}
	if n := replay("--endpoint", "ep1", "--since", t0.Format(time.RFC3339)); n != 2 {
		t.Fatalf("replay --endpoint ep1 --since: %d, want 2 (m1 and m2, not m0 before it nor m3 of ep2)", n)
	}
	opens := opened
	if n := replay("--message", "unknown"); n != 0 || opened != opens {
		t.Fatalf("replay of an unknown message: %d, producer opened %d more times", n, opened-opens)
	}
	for _, bad := range [][]string{{"--message", "m1", "--endpoint", "ep1"}, {"--endpoint", "ep1"}, {"--since", t0.Format(time.RFC3339)},
		{"--endpoint", "ep1", "--since", "yesterday"}, {}} {
		if _, err := admin(t, ch, opener, append([]string{"webhook", "replay", "--workspace", ws}, bad...)...); err == nil {
			t.Errorf("replay %v: want an error", bad)
		}
	}

	got := readDeliveries(t, e.Brokers(), prefix+schemas.TopicWebhookDeliveries, 4)
	want := map[string]int{"m1/ep1": 4, "m1/sub1": 4, "m2/ep1": 2} // message/target → next attempt
	seen := map[string]int{}
	for _, env := range got {
		var d schemas.WebhookDelivery
		if err := json.Unmarshal(env.Payload, &d); err != nil {
			t.Fatal(err)
		}
		k := d.MessageID + "/" + d.TargetID
		seen[k]++
		if env.Type != schemas.TypeWebhookDelivery || env.Workspace != ws || env.Key != schemas.WebhookDeliveryKey(ws, d.TargetID, d.MessageID) ||
			env.ID != schemas.ChildID(k, schemas.TypeWebhookDelivery, d.Attempt) {
			t.Errorf("%s: envelope %+v", k, env)
		}
		if !d.Replay || d.Attempt != want[k] || !bytes.Equal(d.Body, body(d.MessageID)) || d.URL != "https://hooks.example/"+d.TargetID ||
			d.Event != "CONTACT_CREATED" || (k == "m1/sub1") != (d.TargetKind == "subscription") {
			t.Errorf("%s: delivery %+v body %s", k, d, d.Body)
		}
		if first := t0; d.MessageID == "m2" {
			if !d.FirstAt.Equal(first.Add(time.Hour)) {
				t.Errorf("%s: firstAt %s", k, d.FirstAt)
			}
		} else if !d.FirstAt.Equal(first) {
			t.Errorf("%s: firstAt %s", k, d.FirstAt)
		}
	}
	if seen["m1/ep1"] != 2 || seen["m1/sub1"] != 1 || seen["m2/ep1"] != 1 || len(seen) != 3 {
		t.Errorf("replayed deliveries: %v", seen)
	}
}

// readDeliveries reads n envelopes from the start of topic (failing after
// 30 s) and checks that no more follow within a second.
func readDeliveries(t *testing.T, brokers []string, topic string, n int) []schemas.Envelope {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []schemas.Envelope
	poll := func(wait time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var env schemas.Envelope
			if err := json.Unmarshal(r.Value, &env); err != nil {
				t.Fatalf("record %s: %v", r.Value, err)
			}
			out = append(out, env)
		})
	}
	for deadline := time.Now().Add(30 * time.Second); len(out) < n && time.Now().Before(deadline); {
		poll(time.Until(deadline))
	}
	poll(time.Second) // none beyond n
	if len(out) != n {
		t.Fatalf("%s: %d envelopes, want %d", topic, len(out), n)
	}
	return out
}
