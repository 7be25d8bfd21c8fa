package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sendstream/schemas"
)

// TestKillNineBetweenReportCommitAndPublishLosesNoEvent: provider reports
// (POST /api/providers/reports, delivered) move sent messages under load
// while the server process dies right after the commit of its 60th report
// that moved a status, before publishing
// (SENDSTREAM_FAULT_EXIT_AFTER_COMMIT). The provider's retry would find
// the status moved and publish nothing, so only the outbox can bring the
// events back: after a restart the relay (grace 1 s) publishes them, and
// every delivered message has its EMAIL_DELIVERED on the webhooks topic and
// its delivered status on the status topic, each under one envelope id;
// no message that did not move has either.
func TestKillNineBetweenReportCommitAndPublishLosesNoEvent(t *testing.T) {
	// Mostly waits (timers, relay grace, restarts): runs beside the other
	// kill -9 tests, each on its own broker and topic prefix.
	t.Parallel()
	e := newE2E(t)
	faulty, base := e.serverWith(t, "serve", "SENDSTREAM_FAULT_EXIT_AFTER_COMMIT=60", "SENDSTREAM_OUTBOX_GRACE=1s")
	var ws workspace
	e.admin(t, &ws, "workspace", "create", "--name", "report-kill", "--plan", "enterprise", "--rate-multiplier", "100000")

	ctx := context.Background()
	pg, err := pgx.Connect(ctx, e.st.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(ctx)
	// Sent messages, stored as the delivery stage leaves them: no send
	// envelope, so nothing but the reports touches them.
	const workers, perWorker = 8, 100
	ids := make([][]string, workers)
	for w := range ids {
		for i := 0; i < perWorker; i++ {
			id := schemas.NewID()
			ids[w] = append(ids[w], id)
			if _, err := pg.Exec(ctx, `INSERT INTO transactional_messages (id, workspace_id, to_email, rfc_message_id, policy_id, status, sent_at)
				VALUES ($1, $2, $3, $1 || '@example.test', 'policy', 'sent', now())`, id, ws.WorkspaceID, fmt.Sprintf("r%d-%d@example.test", w, i)); err != nil {
				t.Fatal(err)
			}
		}
	}

	var answered, failed atomic.Int64
	client := &http.Client{Timeout: 5 * time.Second}
	report := func(id string) bool {
		b, _ := json.Marshal(map[string]any{"reports": []map[string]any{{"type": "delivered", "messageId": id}}})
		req, _ := http.NewRequest("POST", base+"/api/providers/reports", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+ws.APIKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			failed.Add(1)
			return false // the server died under us
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("report of %s: %s", id, resp.Status)
			return false
		}
		answered.Add(1)
		return true
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, id := range ids[w] {
				if !report(id) {
					return
				}
			}
		}()
	}
	wg.Wait()
	exited := make(chan *os.ProcessState, 1)
	go func() {
		st, err := faulty.Process.Wait()
		if err != nil {
			t.Error(err)
		}
		exited <- st
	}()
	var st *os.ProcessState
	select {
	case st = <-exited:
		if st == nil {
			t.FailNow()
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the server did not exit after %d answered reports: the fault hook never counted a report's commit", answered.Load())
	}
	if st.ExitCode() != 137 {
		t.Fatalf("the faulty server exited with %v, want the fault hook's 137", st)
	}
	if answered.Load() < 30 {
		t.Fatalf("only %d answers before the exit; the test proves nothing", answered.Load())
	}
	var left int64
	if err := pg.QueryRow(ctx, "SELECT count(*) FROM contact_outbox WHERE workspace_id = $1", ws.WorkspaceID).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left == 0 {
		t.Fatal("no outbox row was left behind by the exit: the window was not hit")
	}

	// Which messages moved, as committed. A COMMIT the killed server sent
	// just before it died may still be finishing in Postgres: read until
	// two reads a second apart agree.
	readMoved := func() map[string]bool {
		moved := map[string]bool{}
		rows, err := pg.Query(ctx, "SELECT id, status FROM transactional_messages WHERE workspace_id = $1", ws.WorkspaceID)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id, status string
			if err := rows.Scan(&id, &status); err != nil {
				t.Fatal(err)
			}
			moved[id] = status == schemas.MessageDelivered
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return moved
	}
	moved := readMoved()
	for range 10 {
		time.Sleep(time.Second)
		again := readMoved()
		if maps.Equal(moved, again) {
			break
		}
		moved = again
	}

	e.server(t, "serve") // the relay of the new process publishes what is left
	type want struct{ topic, id string }
	var wants []want
	nMoved := 0
	for id, m := range moved {
		if m {
			nMoved++
			wants = append(wants,
				want{schemas.TopicWebhooks, schemas.ChildID(id, schemas.TypeWebhookEmailDelivered, 0)},
				want{schemas.TopicMessageStatus, schemas.ChildID(id, schemas.TypeTransactionalStatus+"/"+schemas.MessageDelivered, 0)})
		}
	}
	var got map[string]map[string][]schemas.Envelope // topic -> id -> records
	var missing []string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		got = map[string]map[string][]schemas.Envelope{}
		for _, topic := range []string{schemas.TopicWebhooks, schemas.TopicMessageStatus} {
			got[topic] = e.topicRecords(t, topic, ws.WorkspaceID)
		}
		missing = missing[:0]
		for _, w := range wants {
			if len(got[w.topic][w.id]) == 0 {
				missing = append(missing, w.topic+" "+w.id)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d events of committed reports are not on their topics after the restart: %v", len(missing), len(wants), missing)
	}
	dups := 0
	for topic, byID := range got {
		for id, recs := range byID {
			env := recs[0]
			if !moved[env.CausationID] {
				t.Errorf("%s %s on %s: its message %q did not move", env.Type, id, topic, env.CausationID)
			}
			for _, r := range recs[1:] {
				dups++
				if r.Type != env.Type || r.Key != env.Key || !r.OccurredAt.Equal(env.OccurredAt) || !bytes.Equal(r.Payload, env.Payload) {
					t.Errorf("records of envelope %s differ: %+v vs %+v", id, env, r)
				}
			}
		}
	}
	t.Logf("%d answers, %d failed calls, %d outbox rows left by the exit; %d messages delivered, each with one EMAIL_DELIVERED and one status id; %d repeated records",
		answered.Load(), failed.Load(), left, nMoved, dups)
}

// topicRecords reads topic from the start up to its end offsets when called
// and returns ws's envelopes by id, every record of each.
func (e *e2eEnv) topicRecords(t *testing.T, topic, ws string) map[string][]schemas.Envelope {
	t.Helper()
	out := map[string][]schemas.Envelope{}
	e.eachEnvelope(t, topic, ws, func(env schemas.Envelope) { out[env.ID] = append(out[env.ID], env) })
	return out
}

// eachEnvelope calls fn, in fetch order, for every envelope of ws on topic
// (unprefixed) from the start up to its end offsets when called (not until
// a poll comes back empty, which a loaded machine can cause early).
func (e *e2eEnv) eachEnvelope(t *testing.T, topic, ws string, fn func(schemas.Envelope)) {
	t.Helper()
	topic = e.prefix + topic
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.broker), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	left := map[int32]int64{} // partition -> end offset still to reach
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %s/%d: %v", topic, o.Partition, o.Err)
		}
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s to its end offsets: %v (partitions left: %v)", topic, ctx.Err(), left)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
			var env schemas.Envelope
			if err := schemas.DecodeEnvelope(r.Value, &env); err != nil {
				t.Fatalf("decode a record of %s: %v", topic, err)
			}
			if env.Workspace == ws {
				fn(env)
			}
		})
	}
}
