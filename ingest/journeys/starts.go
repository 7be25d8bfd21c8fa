package journeys

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"sendstream/ingest"
	"sendstream/schemas"
	"sendstream/sinks/journeys"
	pgsink "sendstream/sinks/postgres"
)

// Group commit of trigger starts: concurrent trigger calls share one
// transaction (journeys.Store.StartMany's multi-row statements and one
// outbox insert, through contacts.Store.InOutbox), so a call costs a share
// of a few round trips instead of about eight. A call is answered only
// after its batch committed: a 2xx still means the execution and its
// started announcement are stored.
const (
	// startWorkers is the start transactions in flight at once: one. Each
	// share-locks its journeys' rows (start_many.sql) and key-share-locks
	// their versions (foreign keys); two transactions holding one row so
	// at once make Postgres create a MultiXact for it, which cost more than
	// the overlap saved: 1.3-1.4k trigger calls/s at 4 workers against
	// 1.8-2.1k at 1 (Postgres 510-550 against 240-290 µs per call) in the
	// journeys benchmark, alternating runs on one host.
	startWorkers = 1
	// startMax is the starts one transaction takes at most.
	startMax = 256
	// startTimeout bounds one start transaction.
	startTimeout = 10 * time.Second
)

// startCall is one trigger call's start.
type startCall struct {
	in        journeys.StartInput
	requestID string // causation of the started announcement
}

// startDone is what a start gave its call: the execution and its outbox
// row, or why it was refused.
type startDone struct {
	exec     journeys.Execution
	msg      ingest.Message
	outboxID int64
	err      error
}

// starter runs the starts of concurrent calls as shared transactions.
type starter struct {
	store  *journeys.Store
	outbox Outbox
	batch  pgsink.Batcher[startCall, startDone]
}

func newStarter(store *journeys.Store, outbox Outbox) *starter {
	s := &starter{store: store, outbox: outbox}
	s.batch = pgsink.Batcher[startCall, startDone]{Workers: startWorkers, Max: startMax, Timeout: startTimeout, Run: s.run}
	return s
}

// start starts one execution in a shared transaction. The wait is not cut
// short by the caller's context, so an answer never hides a start that
// committed after it; startTimeout bounds it.
func (s *starter) start(ctx context.Context, c startCall) startDone {
	d, err := s.batch.Do(context.WithoutCancel(ctx), c)
	if err != nil {
		return startDone{err: err}
	}
	return d
}

// run is one shared transaction: the starts, then the announcements of
// those that started into the contacts outbox, committed together.
func (s *starter) run(ctx context.Context, calls []startCall) ([]startDone, error) {
	ins := make([]journeys.StartInput, len(calls))
	for i := range calls {
		ins[i] = calls[i].in
	}
	var execs []journeys.Execution
	var errs []error
	write := func(tx pgx.Tx) (err error) {
		execs, errs, err = s.store.StartMany(ctx, tx, ins)
		if err != nil {
			return err
		}
		// An execution started waiting at its first step is its own
		// timer: the engine's wake relay fires it (wake_relay.go in
		// sinks/journeys).
		return nil
	}
	announce := func() []ingest.Message {
		var msgs []ingest.Message
		for i := range calls {
			if errs[i] == nil {
				msgs = append(msgs, ingest.Message{Topic: schemas.TopicJourneys, Env: journeys.StartedEnvelope(execs[i], calls[i].requestID)})
			}
		}
		return msgs
	}
	msgs, ids, err := s.outbox.InOutbox(ctx, write, announce)
	if err != nil {
		return nil, err
	}
	out := make([]startDone, len(calls))
	m := 0
	for i := range calls {
		if errs[i] != nil {
			out[i].err = errs[i]
			continue
		}
		out[i] = startDone{exec: execs[i], msg: msgs[m]}
		if m < len(ids) {
			out[i].outboxID = ids[m]
		}
		m++
	}
	return out, nil
}
