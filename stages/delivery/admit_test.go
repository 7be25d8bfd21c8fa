package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sendstream/deploy/stack"
	"sendstream/ingest/auth"
	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/email/smtptest"
)

// TestClaimsOnlyWhatCanBeHandedOff: a claim is never given back when the
// process dies (the message then fails as outcome unknown), so the stage
// claims only AdmitPerSend messages per relay connection. With a relay of
// two connections holding every message until released and 20 Handle
// calls at once, exactly 4 messages are claimed (2 at the relay, 2 next)
// and the other 16 stay unclaimed; once the relay answers, every message
// is sent once.
func TestClaimsOnlyWhatCanBeHandedOff(t *testing.T) {
	const n, pool = 20, 2
	pg := stack.PG(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws, _, err := auth.NewStore(pg).CreateWorkspace(ctx, auth.NewWorkspace{Name: "delivery admit " + schemas.NewID()[20:], Plan: "pro"})
	if err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	var atRelay atomic.Int32
	server := smtptest.Start(t, smtptest.Options{Data: func(smtptest.Message) error {
		atRelay.Add(1)
		<-hold
		return nil
	}})
	cfg := DefaultConfig().FromSettings(map[string]string{"secret": "s", "smtp_url": fmt.Sprintf("smtp://%s?tls=none&pool=%d", server.Addr, pool)})
	s, err := New(ctx, pipeline.Resources{Postgres: pg}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		id := schemas.NewID()
		p := schemas.SendPayload{MessageID: id, RFCMessageID: id + "@admit.test", To: fmt.Sprintf("r%d@example.test", i),
			From:    schemas.Address{Email: "noreply@admit.test"},
			Policy:  schemas.PolicyRef{ID: "p", Key: "transactional", Kind: schemas.PolicyTransactional, Provider: "smtp"},
			Subject: "Hello", HTML: "<p>hi</p>", AcceptedAt: time.Now().UTC()}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		env := schemas.Envelope{ID: id, Workspace: ws, Type: schemas.TypeTransactionalSend, Key: ws + ":" + id, OccurredAt: p.AcceptedAt, Payload: b}
		wg.Go(func() {
			if _, err := s.Handle(ctx, env); err != nil {
				errs <- err
			}
		})
	}
	count := func(q string) int {
		var c int
		if err := pg.QueryRow(ctx, q, ws).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	claimed := func() int {
		return count(`SELECT count(*) FROM transactional_messages WHERE workspace_id = $1 AND status = 'queued' AND claim_token IS NOT NULL`)
	}
	want := AdmitPerSend * pool
	for atRelay.Load() < pool || claimed() < want {
		if ctx.Err() != nil {
			close(hold)
			t.Fatalf("%d messages at the relay and %d claimed, want %d and %d", atRelay.Load(), claimed(), pool, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // room for more claims to show up
	got := claimed()
	close(hold)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Handle: %v", err)
	}
	if got != want {
		t.Errorf("%d messages claimed while the relay held %d, want %d (AdmitPerSend per connection)", got, pool, want)
	}
	if sent := count(`SELECT count(*) FROM transactional_messages WHERE workspace_id = $1 AND status = 'sent'`); sent != n || len(server.Messages()) != n {
		t.Errorf("%d messages sent, %d at the relay; want %d each", sent, len(server.Messages()), n)
	}
}
