package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"sendstream/schemas"
)

// TestKillNineBetweenCommitAndPublishLosesNoContactEvent: contacts are
// created and updated, and contacts subscribed to a list by email, under
// load, while the server process dies right after the commit of its 60th
// contacts write, before publishing (SENDSTREAM_FAULT_EXIT_AFTER_COMMIT:
// os.Exit, which like kill -9 runs nothing more). After a restart the
// outbox relay (grace 1 s) publishes what the dead process committed, so
// every contact in Postgres has its contact.created.v1 on the topic, and
// every updated contact the contact.updated.v1 of its last update, each
// under exactly one envelope id (the id the request would have used).
// Records repeating an id are allowed and counted: a request that
// published just before the exit may not have deleted its outbox row yet,
// and the relay then publishes the same id again, which the stages dedup
// by env.ID. No record carries an id that matches no committed change.
// List membership events are not in the outbox yet and not asserted.
func TestKillNineBetweenCommitAndPublishLosesNoContactEvent(t *testing.T) {
	e := newE2E(t)
	faulty, base := e.serverWith(t, "serve", "SENDSTREAM_FAULT_EXIT_AFTER_COMMIT=60", "SENDSTREAM_OUTBOX_GRACE=1s")
	var ws workspace
	e.admin(t, &ws, "workspace", "create", "--name", "outbox-kill", "--plan", "enterprise", "--rate-multiplier", "100000")
	var list struct {
		ID string `json:"id"`
	}
	e.admin(t, &list, "list", "create", "--workspace", ws.WorkspaceID, "--name", "News")

	var answered, failed atomic.Int64
	client := &http.Client{Timeout: 5 * time.Second}
	post := func(path string, body any) bool {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", base+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+ws.APIKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			failed.Add(1)
			return false // the server died under us
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answered.Add(1)
		return true
	}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				var ok bool
				switch i % 3 {
				case 0:
					ok = post("/api/v1/contacts", map[string]any{"email": fmt.Sprintf("w%d-%d@example.com", w, i)})
				case 1: // an update of the contact just created
					ok = post("/api/v1/contacts", map[string]any{"email": fmt.Sprintf("w%d-%d@example.com", w, i-1), "firstName": fmt.Sprintf("N%d", i)})
				default:
					ok = post("/api/v1/lists/"+list.ID+"/subscribe", map[string]any{"email": fmt.Sprintf("s%d-%d@example.com", w, i)})
				}
				if !ok {
					return
				}
			}
		}()
	}
	wg.Wait()
	st, err := faulty.Process.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if st.ExitCode() != 137 {
		t.Fatalf("the faulty server exited with %v, want the fault hook's 137", st)
	}
	if answered.Load() < 30 {
		t.Fatalf("only %d answers before the exit; the test proves nothing", answered.Load())
	}

	ctx := context.Background()
	pg, err := pgx.Connect(ctx, e.st.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(ctx)
	var left int64
	if err := pg.QueryRow(ctx, "SELECT count(*) FROM contact_outbox WHERE workspace_id = $1", ws.WorkspaceID).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left == 0 {
		t.Fatal("no outbox row was left behind by the exit: the window was not hit")
	}
	want := map[string]string{} // envelope id -> type
	rows, err := pg.Query(ctx, "SELECT id, created_at, updated_at FROM contacts WHERE workspace_id = $1", ws.WorkspaceID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var created, updated time.Time
		if err := rows.Scan(&id, &created, &updated); err != nil {
			t.Fatal(err)
		}
		want[schemas.IDFromKey(ws.WorkspaceID, schemas.TypeContactCreated, id)] = schemas.TypeContactCreated
		if updated.After(created) {
			key := id + "@" + updated.UTC().Format(time.RFC3339Nano)
			want[schemas.IDFromKey(ws.WorkspaceID, schemas.TypeContactUpdated, key)] = schemas.TypeContactUpdated
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	e.server(t, "serve") // the relay of the new process publishes what is left
	deadline := time.Now().Add(60 * time.Second)
	var seen map[string]int
	var missing int
	for {
		seen = e.contactEvents(t, ws.WorkspaceID)
		missing = 0
		for id := range want {
			if seen[id] == 0 {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if missing > 0 {
		t.Fatalf("%d of %d committed changes have no event on the topic after the restart (%d outbox rows were left)", missing, len(want), left)
	}
	dups := 0
	for id, n := range seen {
		if _, ok := want[id]; !ok {
			t.Errorf("event %s matches no committed change (or an update that is not the contact's last)", id)
		}
		dups += n - 1
	}
	t.Logf("%d answers, %d failed calls; %d outbox rows left by the exit; %d changes, each with one event id; %d repeated records (same id, deduped by the stages)",
		answered.Load(), failed.Load(), left, len(want), dups)
}

// contactEvents counts the records per envelope id of contact.created.v1
// and contact.updated.v1 of ws on the contacts topic, reading it from the
// start until it is idle.
func (e *e2eEnv) contactEvents(t *testing.T, ws string) map[string]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.broker), kgo.ConsumeTopics(e.prefix+schemas.TopicContacts),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[string]int{}
	idle := 0
	for idle < 3 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			var env schemas.Envelope
			if err := schemas.DecodeEnvelope(r.Value, &env); err != nil {
				t.Fatalf("decode a record of the contacts topic: %v", err)
			}
			if env.Workspace == ws && (env.Type == schemas.TypeContactCreated || env.Type == schemas.TypeContactUpdated) {
				out[env.ID]++
			}
		})
		if n == 0 {
			idle++
		} else {
			idle = 0
		}
	}
	return out
}
