package delivery

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/schemas"
	pgsink "sendstream/sinks/postgres"
)

// This file holds the stage's Postgres statements. Claims, releases and
// finishes of concurrent Handle calls share statements (pgsink.Batcher):
// one round trip for every message in hand under load.

var (
	//go:embed sql/claim.sql
	sqlClaim string
	//go:embed sql/claim_queued.sql
	sqlClaimQueued string
	//go:embed sql/finish.sql
	sqlFinish string
	//go:embed sql/release.sql
	sqlRelease string
	//go:embed sql/payloads.sql
	sqlPayloads string
	//go:embed sql/restore.sql
	sqlRestore string
)

// States of a claim (claim.sql); "" when the message has no row.
const (
	stateClaimed = "claimed"
	stateBusy    = "busy"
	stateStale   = "stale"
	stateDone    = "done"
	stateMissing = ""
)

// claim is what claiming one message found.
type claim struct {
	state string
	// Of a done or stale message: its status, when it was sent (nil if
	// never) or failed, and the failure reason.
	status   string
	sentAt   *time.Time
	failedAt *time.Time
	reason   string
}

// finishIn is the outcome of one hand-off to record.
type finishIn struct {
	id, status, reason, providerID string
	subject                        string // as rendered, when rendered
	rendered                       bool   // false: it failed before its subject rendered
}

// finishOut says whether the outcome was recorded (the claim was still
// this stage's) and its time.
type finishOut struct {
	at time.Time
	ok bool
}

// batchLinger is how long a claim or finish statement waits for more
// calls once statements are shared (pgsink.Batcher.Linger): a message waits
// at most this much longer, and under load the statements carry more
// messages each. Against no linger, transactional-e2e and -e2e-dkim gave
// 1.027 and 1.022 (medians of 6 alternating A/B pairs, bench -ab), within
// the pairs' noise; lingering after every statement gave 1.077 and 1.074
// but delays a lone message too.
const batchLinger = time.Millisecond

// store runs the stage's statements on a pool of its own.
type store struct {
	pg       *pgxpool.Pool
	token    string // this instance's claim token
	lease    time.Duration
	claims   pgsink.Batcher[string, claim]
	finishes pgsink.Batcher[finishIn, finishOut]
	releases pgsink.Batcher[string, struct{}]
}

// newStore returns a store whose batchers take up to batchMax messages a
// statement. One claim and one finish statement is in flight at a time, and
// the next batch fills while it runs: with two in flight, the hand-offs
// that finish one by one (each after its own render, signature and relay
// answer) went to Postgres 5 to a statement instead of 10, and
// transactional-e2e-dkim spent about 70 µs more Postgres CPU per message
// (bench/README.md, "Profiling and experiments").
//
// Claims and finishes linger (batchLinger) once their statements are
// shared, since under load they arrive one by one.
func newStore(pg *pgxpool.Pool, token string, lease time.Duration, batchMax int) *store {
	s := &store{pg: pg, token: token, lease: lease}
	s.claims = pgsink.Batcher[string, claim]{Workers: 1, Max: batchMax, Timeout: 10 * time.Second, Linger: batchLinger, Run: s.claimBatch}
	s.finishes = pgsink.Batcher[finishIn, finishOut]{Workers: 1, Max: batchMax, Timeout: 10 * time.Second, Linger: batchLinger, Run: s.finishBatch}
	s.releases = pgsink.Batcher[string, struct{}]{Workers: 1, Max: batchMax, Timeout: 10 * time.Second, Run: s.releaseBatch}
	return s
}

// close stops the batchers.
func (s *store) close() {
	s.claims.Close()
	s.finishes.Close()
	s.releases.Close()
}

// claim claims one message in a statement shared with concurrent calls.
func (s *store) claim(ctx context.Context, id string) (claim, error) {
	c, err := s.claims.Do(ctx, id)
	if err != nil {
		return c, fmt.Errorf("claim message %s: %w", id, err)
	}
	return c, nil
}

// claimBatch returns each id's claim (claim.sql): it claims the queued ones
// in one update (claim_queued.sql), which is every one in the common case,
// and runs claim.sql only for the rest. claim.sql alone would lock every
// row before updating it, a second write of each row.
func (s *store) claimBatch(ctx context.Context, ids []string) ([]claim, error) {
	got, err := s.claimIDs(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]claim, len(ids))
	for i, id := range ids {
		out[i] = got[id]
	}
	return out, nil
}

// claimIDs is claimBatch by id (an id given twice is claimed once).
func (s *store) claimIDs(ctx context.Context, ids []string) (map[string]claim, error) {
	out := make(map[string]claim, len(ids))
	rows, err := s.pg.Query(ctx, sqlClaimQueued, ids, s.token)
	if err != nil {
		return nil, err
	}
	var id string
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { out[id] = claim{state: stateClaimed}; return nil }); err != nil {
		return nil, err
	}
	var rest []string
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			rest = append(rest, id)
		}
	}
	if len(rest) == 0 {
		return out, nil
	}
	rows, err = s.pg.Query(ctx, sqlClaim, rest, s.token, s.lease.Seconds())
	if err != nil {
		return nil, err
	}
	var c claim
	_, err = pgx.ForEachRow(rows, []any{&id, &c.state, &c.status, &c.sentAt, &c.failedAt, &c.reason}, func() error {
		out[id] = c
		return nil
	})
	return out, err
}

// release gives up this stage's claim on a message that was not handed
// off, so it stays queued and is tried again.
func (s *store) release(ctx context.Context, id string) error {
	if _, err := s.releases.Do(ctx, id); err != nil {
		return fmt.Errorf("release claim of %s: %w", id, err)
	}
	return nil
}

func (s *store) releaseBatch(ctx context.Context, ids []string) ([]struct{}, error) {
	if _, err := s.pg.Exec(ctx, sqlRelease, s.token, ids); err != nil {
		return nil, err
	}
	return make([]struct{}, len(ids)), nil
}

// finish records the outcome of a hand-off; ok is false when the claim was
// no longer this stage's (nothing recorded).
func (s *store) finish(ctx context.Context, in finishIn) (finishOut, error) {
	out, err := s.finishes.Do(ctx, in)
	if err != nil {
		return out, fmt.Errorf("record outcome of %s: %w", in.id, err)
	}
	return out, nil
}

func (s *store) finishBatch(ctx context.Context, ins []finishIn) ([]finishOut, error) {
	n := len(ins)
	ids, statuses, reasons, pids, subjects := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	rendered := make([]bool, n)
	for i, in := range ins {
		ids[i], statuses[i], reasons[i], pids[i] = in.id, in.status, in.reason, in.providerID
		subjects[i], rendered[i] = in.subject, in.rendered
	}
	rows, err := s.pg.Query(ctx, sqlFinish, s.token, ids, statuses, reasons, pids, subjects, rendered)
	if err != nil {
		return nil, err
	}
	at := make(map[string]time.Time, n)
	var id string
	var t time.Time
	if _, err := pgx.ForEachRow(rows, []any{&id, &t}, func() error { at[id] = t; return nil }); err != nil {
		return nil, err
	}
	out := make([]finishOut, n)
	for i, in := range ins {
		t, ok := at[in.id]
		out[i] = finishOut{at: t, ok: ok}
	}
	return out, nil
}

// restore stores the row of a message that has none from its envelope
// (ingest claims commit asynchronously, so a Postgres crash may lose the
// last ones). Rare: one statement of its own.
func (s *store) restore(ctx context.Context, env schemas.Envelope, p *schemas.SendPayload) error {
	contactID := ""
	if p.Contact != nil {
		contactID = p.Contact.ID
	}
	at := p.AcceptedAt
	if at.IsZero() {
		at = env.OccurredAt
	}
	one := func(v string) []string { return []string{v} }
	_, err := s.pg.Exec(ctx, sqlRestore, one(p.MessageID), one(env.Workspace), one(p.ExternalID), one(p.To), one(contactID),
		one(p.RFCMessageID), one(p.Policy.ID), one(p.TemplateID), one(providerName(p.Policy.Provider)), []time.Time{at})
	if err != nil {
		return fmt.Errorf("restore row of %s: %w", p.MessageID, err)
	}
	return nil
}

// errNoPayload: a spilled message's stored payload is gone (it is deleted
// when the message is finished).
var errNoPayload = errors.New("no stored payload")

// loadSpilled returns the stored payload of a message whose envelope
// carries a reference (large messages: rare, one statement each).
func (s *store) loadSpilled(ctx context.Context, id string) (schemas.SendPayload, error) {
	rows, err := s.pg.Query(ctx, sqlPayloads, []string{id})
	if err != nil {
		return schemas.SendPayload{}, fmt.Errorf("load payload of %s: %w", id, err)
	}
	var got string
	var b, raw []byte
	var found bool
	if _, err := pgx.ForEachRow(rows, []any{&got, &b}, func() error { found, raw = true, append([]byte(nil), b...); return nil }); err != nil {
		return schemas.SendPayload{}, fmt.Errorf("load payload of %s: %w", id, err)
	}
	if !found {
		return schemas.SendPayload{}, fmt.Errorf("load payload of %s: %w", id, errNoPayload)
	}
	p, err := schemas.DecodeSendPayload(raw)
	if err != nil {
		return p, fmt.Errorf("load payload of %s: decode: %w", id, err)
	}
	return p, nil
}
