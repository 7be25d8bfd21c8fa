package webhookdelivery

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/schemas"
	pgsink "sendstream/sinks/postgres"
)

// This file makes each attempt claimed durably before it is sent (table
// webhook_delivery_claims, migration 0053): an envelope handled again after
// a crash (read again from Kafka, or published twice by River) resumes
// after the last claimed attempt instead of sending it again. Claims and
// settles of concurrent Handle calls share statements (pgsink.Batcher): one
// round trip for every delivery in hand under load.

var (
	//go:embed sql/claim.sql
	sqlClaim string
	//go:embed sql/claim_held.sql
	sqlClaimHeld string
	//go:embed sql/settle.sql
	sqlSettle string
	//go:embed sql/prune.sql
	sqlPrune string
)

// States of a claim.
const (
	claimSending = "sending" // claimed; the attempt's outcome is unknown
	claimSettled = "settled" // failed; the next attempt is scheduled
	claimDone    = "done"    // succeeded, retired, or the last attempt
)

// ClaimRetention is how long a delivery's claim is kept after its last
// claim (pruned by the scheduler's periodic job): longer than any wait of
// the schedule, so every envelope of a delivery finds it.
const ClaimRetention = 72 * time.Hour

// claimIn asks for attempt (attempt, throttled) of a delivery.
type claimIn struct {
	delivery           string
	attempt, throttled int
	replay             bool
}

// held is what claiming found: ok when the claim was taken, else the claim
// that holds the delivery.
type held struct {
	ok                 bool
	attempt, throttled int
	state              string
	outputs            []schemas.Envelope
}

// settleIn records the outcome of a claimed attempt.
type settleIn struct {
	claimIn
	state   string
	outputs []byte
}

// claims runs the claim statements on pg.
type claims struct {
	pg      *pgxpool.Pool
	claim   pgsink.Batcher[claimIn, held]
	settles pgsink.Batcher[settleIn, struct{}]
}

func newClaims(pg *pgxpool.Pool) *claims {
	c := &claims{pg: pg}
	c.claim = pgsink.Batcher[claimIn, held]{Workers: 2, Max: 512, Timeout: 10 * time.Second, Run: c.claimBatch}
	c.settles = pgsink.Batcher[settleIn, struct{}]{Workers: 2, Max: 512, Timeout: 10 * time.Second, Run: c.settleBatch}
	return c
}

// take claims one attempt in a statement shared with concurrent calls.
func (c *claims) take(ctx context.Context, in claimIn) (held, error) {
	h, err := c.claim.Do(ctx, in)
	if err != nil {
		return h, fmt.Errorf("claim attempt %d of webhook delivery %s: %w", in.attempt, in.delivery, err)
	}
	return h, nil
}

// settle records the outcome of a claimed attempt and the attempt rows
// its Handle returns.
func (c *claims) settle(ctx context.Context, in claimIn, state string, outs []schemas.Envelope) error {
	// As json.Marshal(outs) writes it, without its reflection.
	b := make([]byte, 0, 512*len(outs)+4)
	if outs == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
	}
	for i := range outs {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = schemas.AppendEnvelope(b, &outs[i]); err != nil {
			return fmt.Errorf("settle webhook delivery %s: %w", in.delivery, err)
		}
	}
	if outs != nil {
		b = append(b, ']')
	}
	if _, err := c.settles.Do(ctx, settleIn{claimIn: in, state: state, outputs: b}); err != nil {
		return fmt.Errorf("settle attempt %d of webhook delivery %s: %w", in.attempt, in.delivery, err)
	}
	return nil
}

// claimBatch claims every delivery of the batch it can (claim.sql) and
// reads the claims that hold the others (claim_held.sql). A delivery asked
// for twice in one batch is claimed by its first call; the second finds
// that claim.
func (c *claims) claimBatch(ctx context.Context, ins []claimIn) ([]held, error) {
	seen := make(map[string]bool, len(ins))
	var ds []string
	var as, ts []int32
	var rs []bool
	for _, in := range ins {
		if !seen[in.delivery] {
			seen[in.delivery] = true
			ds, as, ts = append(ds, in.delivery), append(as, int32(in.attempt)), append(ts, int32(in.throttled))
			rs = append(rs, in.replay)
		}
	}
	rows, err := c.pg.Query(ctx, sqlClaim, ds, as, ts, rs)
	if err != nil {
		return nil, err
	}
	claimed := make(map[string]bool, len(ds))
	var d string
	if _, err := pgx.ForEachRow(rows, []any{&d}, func() error { claimed[d] = true; return nil }); err != nil {
		return nil, err
	}
	out := make([]held, len(ins))
	var rest []string
	first := make(map[string]bool, len(ins))
	for i, in := range ins {
		if claimed[in.delivery] && !first[in.delivery] {
			first[in.delivery] = true
			out[i].ok = true
		} else {
			rest = append(rest, in.delivery)
		}
	}
	if len(rest) == 0 {
		return out, nil
	}
	rows, err = c.pg.Query(ctx, sqlClaimHeld, rest)
	if err != nil {
		return nil, err
	}
	found := map[string]held{}
	var h held
	var outputs []byte
	if _, err := pgx.ForEachRow(rows, []any{&d, &h.attempt, &h.throttled, &h.state, &outputs}, func() error {
		g := h
		if len(outputs) > 0 {
			if err := json.Unmarshal(outputs, &g.outputs); err != nil {
				return fmt.Errorf("attempt rows of webhook delivery %s: %w", d, err)
			}
		}
		found[d] = g
		return nil
	}); err != nil {
		return nil, err
	}
	for i, in := range ins {
		if !out[i].ok {
			out[i] = found[in.delivery]
		}
	}
	return out, nil
}

// settleBatch records the outcomes of a batch (settle.sql).
func (c *claims) settleBatch(ctx context.Context, ins []settleIn) ([]struct{}, error) {
	ds, ss := make([]string, len(ins)), make([]string, len(ins))
	as, ts := make([]int32, len(ins)), make([]int32, len(ins))
	os := make([][]byte, len(ins))
	for i, in := range ins {
		ds[i], as[i], ts[i], ss[i], os[i] = in.delivery, int32(in.attempt), int32(in.throttled), in.state, in.outputs
	}
	if _, err := c.pg.Exec(ctx, sqlSettle, ds, as, ts, ss, os); err != nil {
		return nil, err
	}
	return make([]struct{}, len(ins)), nil
}

// prune deletes claims older than ClaimRetention, a bounded number per
// statement, until none is left.
func prune(ctx context.Context, pg *pgxpool.Pool, retention time.Duration) error {
	for {
		tag, err := pg.Exec(ctx, sqlPrune, retention.Seconds(), 10_000)
		if err != nil {
			return fmt.Errorf("prune webhook delivery claims: %w", err)
		}
		if tag.RowsAffected() < 10_000 {
			return nil
		}
	}
}

// close stops the batchers.
func (c *claims) close() {
	c.claim.Close()
	c.settles.Close()
}
