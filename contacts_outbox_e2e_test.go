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

	"sendstream/schemas"
)

// killNineOp is one request of a worker's cycle in the kill -9 load: its
// path and body for worker w at step i.
type killNineOp func(list string, w, i int) (path string, body map[string]any)

var (
	opCreate = func(_ string, w, i int) (string, map[string]any) {
		return "/api/v1/contacts", map[string]any{"email": fmt.Sprintf("c%d-%d@example.com", w, i)}
	}
	// opUpdate updates the contact opCreate made one step before.
	opUpdate = func(_ string, w, i int) (string, map[string]any) {
		return "/api/v1/contacts", map[string]any{"email": fmt.Sprintf("c%d-%d@example.com", w, i-1), "firstName": fmt.Sprintf("N%d", i)}
	}
	// opSubscribeNew subscribes a new email (the contact is created too).
	opSubscribeNew = func(list string, w, i int) (string, map[string]any) {
		return "/api/v1/lists/" + list + "/subscribe", map[string]any{"email": fmt.Sprintf("s%d-%d@example.com", w, i)}
	}
	// opSubscribeCreated subscribes the contact opCreate made k steps
	// before (an existing contact joins the list).
	opSubscribeCreated = func(k int) killNineOp {
		return func(list string, w, i int) (string, map[string]any) {
			return "/api/v1/lists/" + list + "/subscribe", map[string]any{"email": fmt.Sprintf("c%d-%d@example.com", w, i-k)}
		}
	}
	// opUnsubscribe unsubscribes the email that op at k steps before
	// subscribed.
	opUnsubscribe = func(prefix string, k int) killNineOp {
		return func(list string, w, i int) (string, map[string]any) {
			return "/api/v1/lists/" + list + "/unsubscribe", map[string]any{"email": fmt.Sprintf("%s%d-%d@example.com", prefix, w, i-k)}
		}
	}
)

// TestKillNineBetweenCommitAndPublishLosesNoDomainEvent: contacts are
// created and updated, subscribed to a list (new and existing contacts)
// and unsubscribed, under load, while the server process dies right after
// the commit of its 60th write, before publishing
// (SENDSTREAM_FAULT_EXIT_AFTER_COMMIT: os.Exit, which like kill -9 runs
// nothing more). In "memberships" only list writes run, so the write the
// process dies after is a membership change. After a restart the outbox
// relay (grace 1 s) publishes what the dead process committed, so every
// committed change has exactly one domain event on the contacts topic
// (checkDomainEvents).
func TestKillNineBetweenCommitAndPublishLosesNoDomainEvent(t *testing.T) {
	// Mostly waits (timers, relay grace, restarts): runs beside the other
	// kill -9 tests, each on its own broker and topic prefix.
	t.Parallel()
	for _, tc := range []struct {
		name  string
		cycle []killNineOp
	}{
		{"mixed", []killNineOp{opCreate, opUpdate, opSubscribeNew, opSubscribeCreated(3), opUnsubscribe("c", 4)}},
		{"memberships", []killNineOp{opSubscribeNew, opUnsubscribe("s", 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) { killNineRun(t, tc.cycle, tc.name == "memberships") })
	}
}

// killNineRun runs cycle on 8 workers against a server that exits after
// its 60th committed write, restarts it and checks the topic. With
// wantEnvelopeRows, the exit must have left rows of membership events.
func killNineRun(t *testing.T, cycle []killNineOp, wantEnvelopeRows bool) {
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
		if resp.StatusCode/100 != 2 {
			t.Errorf("POST %s: %s", path, resp.Status)
			return false
		}
		answered.Add(1)
		return true
	}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A worker stops at its first unanswered request, so every
			// step builds on one that committed.
			for i := 0; ; i++ {
				if !post(cycle[i%len(cycle)](list.ID, w, i)) {
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
	var left, leftEnvelopes int64
	if err := pg.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE kind = 'envelope') FROM contact_outbox WHERE workspace_id = $1",
		ws.WorkspaceID).Scan(&left, &leftEnvelopes); err != nil {
		t.Fatal(err)
	}
	if left == 0 {
		t.Fatal("no outbox row was left behind by the exit: the window was not hit")
	}
	if wantEnvelopeRows && leftEnvelopes == 0 {
		t.Fatal("no membership event was left in the outbox by the exit: the window of a membership write was not hit")
	}

	e.server(t, "serve") // the relay of the new process publishes what is left
	checkDomainEvents(t, e, pg, ws.WorkspaceID, list.ID)
	t.Logf("%d answers, %d failed calls; %d outbox rows left by the exit (%d of membership events)",
		answered.Load(), failed.Load(), left, leftEnvelopes)
}

// change is what one committed change must have on the topic: one event of
// its type, under one envelope id.
type change struct{ typ, contact string }

// checkDomainEvents waits until every change committed in ws (and its list)
// has its event on the contacts topic and then checks that each has
// exactly one envelope id, that no event announces a change that was not
// committed, and that records repeating an id carry the same envelope.
//
// Contacts: contact.created.v1 of every contact, and contact.updated.v1 of
// its last update, by the ids derived from the rows. Memberships (their
// ids derive from the request id, so they are counted per change):
// contact.added_to_list.v1 and contact.joined_list.v1 once per membership,
// contact.removed_from_list.v1 once per UNSUBSCRIBED one (the load never
// subscribes a contact twice). Records repeating an id are allowed: a
// request that published just before the exit may not have deleted its
// outbox row yet, and the relay publishes it again; stages dedup by env.ID.
func checkDomainEvents(t *testing.T, e *e2eEnv, pg *pgx.Conn, ws, list string) {
	t.Helper()
	ctx := context.Background()
	wantIDs := map[string]string{} // envelope id -> type
	rows, err := pg.Query(ctx, "SELECT id, created_at, updated_at FROM contacts WHERE workspace_id = $1", ws)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var created, updated time.Time
		if err := rows.Scan(&id, &created, &updated); err != nil {
			t.Fatal(err)
		}
		wantIDs[schemas.IDFromKey(ws, schemas.TypeContactCreated, id)] = schemas.TypeContactCreated
		if updated.After(created) {
			key := id + "@" + updated.UTC().Format(time.RFC3339Nano)
			wantIDs[schemas.IDFromKey(ws, schemas.TypeContactUpdated, key)] = schemas.TypeContactUpdated
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	wantChanges := map[change]bool{}
	rows, err = pg.Query(ctx, "SELECT contact_id, status FROM memberships WHERE list_id = $1", list)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var contact, status string
		if err := rows.Scan(&contact, &status); err != nil {
			t.Fatal(err)
		}
		wantChanges[change{schemas.TypeContactAddedToList, contact}] = true
		wantChanges[change{schemas.TypeContactJoinedList, contact}] = true
		if status == "UNSUBSCRIBED" {
			wantChanges[change{schemas.TypeContactRemovedFromList, contact}] = true
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(60 * time.Second)
	var got topicEvents
	var missing []string
	for {
		got = e.domainEvents(t, ws)
		missing = missing[:0]
		for id, typ := range wantIDs {
			if got.records[id] == 0 {
				missing = append(missing, typ+" "+id)
			}
		}
		for c := range wantChanges {
			if len(got.ids[c]) == 0 {
				missing = append(missing, c.typ+" of contact "+c.contact)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(missing) > 0 {
		var left int64
		_ = pg.QueryRow(ctx, "SELECT count(*) FROM contact_outbox WHERE workspace_id = $1", ws).Scan(&left)
		t.Errorf("%d of %d committed changes have no event on the topic after the restart (%d outbox rows left): %v",
			len(missing), len(wantIDs)+len(wantChanges), left, missing)
		rows, err := pg.Query(ctx, "SELECT id, email, created_at, updated_at FROM contacts WHERE workspace_id = $1 ORDER BY created_at", ws)
		if err == nil {
			for rows.Next() {
				var id, email string
				var c, u time.Time
				_ = rows.Scan(&id, &email, &c, &u)
				t.Logf("contact %s %s created %s updated %s: %v", id, email, c.Format(time.RFC3339Nano), u.Format(time.RFC3339Nano), got.keys[ws+":"+id])
			}
			rows.Close()
		}
		t.FailNow()
	}
	dups := 0
	for id, n := range got.records {
		dups += n - 1
		typ := got.types[id]
		switch typ {
		case schemas.TypeContactCreated, schemas.TypeContactUpdated:
			if wantIDs[id] != typ {
				t.Errorf("%s %s matches no committed change (or an update that is not the contact's last)", typ, id)
			}
		}
	}
	for c, ids := range got.ids {
		if !wantChanges[c] {
			t.Errorf("%s of contact %s: no such committed change, yet %d event ids", c.typ, c.contact, len(ids))
		} else if len(ids) != 1 {
			t.Errorf("%s of contact %s: %d event ids, want exactly one", c.typ, c.contact, len(ids))
		}
	}
	for _, d := range got.differ {
		t.Errorf("records of envelope %s differ: %s", d[0], d[1])
	}
	t.Logf("%d contact changes and %d membership changes, each with one event id; %d repeated records (same id and envelope, deduped by the stages)",
		len(wantIDs), len(wantChanges), dups)
}

// topicEvents is what domainEvents read.
type topicEvents struct {
	records map[string]int                 // envelope id -> records
	types   map[string]string              // envelope id -> type
	ids     map[change]map[string]struct{} // membership change -> envelope ids
	differ  [][2]string                    // id, how a repeated record differs from the first
	keys    map[string][]string            // envelope key -> "type id" of its records
}

// domainEvents reads the contact and membership events of ws on the
// contacts topic from the start up to its end offsets when called (not
// until a poll comes back empty, which a loaded machine can cause early).
func (e *e2eEnv) domainEvents(t *testing.T, ws string) topicEvents {
	t.Helper()
	out := topicEvents{records: map[string]int{}, types: map[string]string{}, ids: map[change]map[string]struct{}{}, keys: map[string][]string{}}
	first := map[string]schemas.Envelope{}
	e.eachEnvelope(t, schemas.TopicContacts, ws, func(env schemas.Envelope) {
		out.records[env.ID]++
		out.types[env.ID] = env.Type
		out.keys[env.Key] = append(out.keys[env.Key], env.Type+" "+env.ID)
		if f, ok := first[env.ID]; ok {
			if f.Type != env.Type || f.Key != env.Key || !f.OccurredAt.Equal(env.OccurredAt) ||
				f.CausationID != env.CausationID || !bytes.Equal(f.Payload, env.Payload) {
				out.differ = append(out.differ, [2]string{env.ID, fmt.Sprintf("%+v vs %+v", f, env)})
			}
		} else {
			first[env.ID] = env
		}
		switch env.Type {
		case schemas.TypeContactAddedToList, schemas.TypeContactJoinedList, schemas.TypeContactRemovedFromList:
			var p schemas.ListMembershipPayload
			if err := json.Unmarshal(env.Payload, &p); err != nil {
				t.Fatalf("decode %s: %v", env.Type, err)
			}
			c := change{env.Type, p.ContactID}
			if out.ids[c] == nil {
				out.ids[c] = map[string]struct{}{}
			}
			out.ids[c][env.ID] = struct{}{}
		}
	})
	return out
}
