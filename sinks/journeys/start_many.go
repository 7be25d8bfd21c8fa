package journeys

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

//go:embed sql/start_many.sql
var sqlStartMany string

// StartMany starts many executions within tx, the caller's transaction,
// with multi-row statements: the starts of concurrent trigger calls share
// one transaction and a few round trips instead of several each. It makes
// the checks of Start, in the same order and with the same locks (the
// journey share-locked; the re-entry guard's row lock, so racing starts for
// one contact on a once journey start exactly one execution), for starts
// that always carry a fresh ExecutionID (no retried start to find, so no
// lookup of an existing execution) and no CausedBy (the API trigger;
// StartMany refuses one with CausedBy set).
//
// It returns one Execution and one error per input, in input order: a
// refused start has its refusal (ErrNotFound, ErrNotActive,
// ErrWrongTrigger, ErrContactNotFound, ErrContactNotActive, ErrReentry)
// and the others still start; err is a failure of the whole transaction.
// Several starts of one contact on one journey run one after another in
// tx, in input order, as separate starts would.
//
// A start with Wait, when its journey's current version is Wait.Version,
// starts waiting at its first step (start_wait.go): its Execution has
// NextWakeAt (and WaitEvent), and the caller must store the wait's timer
// (WakeTimer) in tx too.
func (s *Store) StartMany(ctx context.Context, tx pgx.Tx, ins []StartInput) ([]Execution, []error, error) {
	execs := make([]Execution, len(ins))
	errs := make([]error, len(ins))
	now := s.now().UTC().Truncate(time.Microsecond)
	// Rounds: the k-th start of each (journey, contact) goes in round k, so
	// no statement writes one guard row twice.
	seen := make(map[string]int, len(ins))
	var rounds [][]int
	for i, in := range ins {
		if in.ExecutionID == "" || in.CausedBy != "" {
			return nil, nil, errors.New("start journey executions: each start needs an execution id and no CausedBy")
		}
		k := in.Workspace + "\x00" + in.JourneyID + "\x00" + in.ContactID + "\x00" + in.Email
		r := seen[k]
		seen[k] = r + 1
		if r == len(rounds) {
			rounds = append(rounds, nil)
		}
		rounds[r] = append(rounds[r], i)
	}
	for _, round := range rounds {
		if err := s.startRound(ctx, tx, ins, round, now, execs, errs); err != nil {
			return nil, nil, err
		}
	}
	return execs, errs, nil
}

// startRound runs start_many.sql for the starts ins[idx...] and fills
// their execs and errs.
func (s *Store) startRound(ctx context.Context, tx pgx.Tx, ins []StartInput, idx []int, now time.Time,
	execs []Execution, errs []error) error {
	n := len(idx)
	ws, jid, trig, cid, email, eid, src := make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	data := make([]*string, n)
	waitV, wakeAt, waitEvent, scope := make([]int32, n), make([]*time.Time, n), make([]string, n), make([]string, n)
	for r, i := range idx {
		in := &ins[i]
		if w := in.Wait; w != nil && w.Version > 0 && w.Step != nil && w.Scope != "" && StartsWaiting(w.Step) {
			due, event, err := WaitEnd(w.Step, now)
			if err != nil {
				return fmt.Errorf("start journey execution %s: first step: %w", in.ExecutionID, err)
			}
			due = due.UTC()
			waitV[r], wakeAt[r], waitEvent[r], scope[r] = int32(w.Version), &due, event, w.Scope
		}
		ws[r], jid[r], trig[r], cid[r], email[r], eid[r], src[r] =
			in.Workspace, in.JourneyID, in.Trigger, in.ContactID, in.Email, in.ExecutionID, in.SourceID
		if len(in.Data) > 0 {
			d := string(in.Data)
			data[r] = &d
		}
	}
	rows, err := tx.Query(ctx, sqlStartMany, ws, jid, trig, cid, email, eid, src, data, now, waitV, wakeAt, waitEvent, scope)
	if err != nil {
		return fmt.Errorf("start %d journey executions: %w", n, err)
	}
	defer rows.Close()
	r := 0
	for rows.Next() {
		if r >= n {
			return fmt.Errorf("start %d journey executions: more answers than starts", n)
		}
		var refusal string
		var e Execution
		var waits bool
		if err := rows.Scan(&refusal, &e.ContactID, &e.Email, &e.Version, &waits); err != nil {
			return fmt.Errorf("start %d journey executions: %w", n, err)
		}
		i := idx[r]
		r++
		if refusal != "" {
			errs[i] = startRefusal(refusal)
			continue
		}
		in := &ins[i]
		e.ID, e.Workspace, e.JourneyID, e.State, e.Position = in.ExecutionID, in.Workspace, in.JourneyID, StateActive, "0"
		e.Trigger, e.SourceID, e.Data, e.StartedAt = in.Trigger, in.SourceID, in.Data, now
		if waits {
			e.NextWakeAt, e.WaitEvent = wakeAt[r-1], waitEvent[r-1]
		}
		execs[i] = e
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("start %d journey executions: %w", n, err)
	}
	if r != n {
		return fmt.Errorf("start %d journey executions: %d answers", n, r)
	}
	return nil
}

// startRefusal is the error of a refusal start_many.sql names.
func startRefusal(code string) error {
	switch code {
	case "journey_not_found":
		return ErrNotFound
	case "journey_not_active":
		return ErrNotActive
	case "wrong_trigger":
		return ErrWrongTrigger
	case "contact_not_found":
		return ErrContactNotFound
	case "contact_not_active":
		return ErrContactNotActive
	case "reentry":
		return ErrReentry
	}
	return fmt.Errorf("start journey execution: unknown refusal %q", code)
}
