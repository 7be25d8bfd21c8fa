package journeys

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The execution engine's reads and writes (stages/journeys; migration
// 0061). The engine runs one step per transaction: LockRun locks the
// execution, the step's effects and its timer are written in the same
// transaction as RecordStep and Move, so a crash at any point either keeps
// the step to run again or has it recorded as finished, never half.

var (
	//go:embed sql/engine_lock.sql
	sqlEngineLock string
	//go:embed sql/engine_peek.sql
	sqlEnginePeek string
	//go:embed sql/engine_peek_cause.sql
	sqlEnginePeekCause string
	//go:embed sql/engine_advance.sql
	sqlEngineAdvance string
	//go:embed sql/engine_move.sql
	sqlEngineMove string
	//go:embed sql/engine_step_insert.sql
	sqlEngineStepInsert string
	//go:embed sql/engine_steps_by_cause.sql
	sqlEngineStepsByCause string
	//go:embed sql/engine_contact.sql
	sqlEngineContact string
	//go:embed sql/engine_in_list.sql
	sqlEngineInList string
	//go:embed sql/engine_step_counts.sql
	sqlEngineStepCounts string
)

// Run is an execution as the engine sees it while it holds its row lock.
type Run struct {
	ID            string
	Workspace     string
	JourneyID     string
	Version       int
	ContactID     string
	Email         string
	State         string
	Position      string
	Trigger       string
	Data          json.RawMessage
	StartedAt     time.Time
	NextWakeAt    *time.Time // when its wait ends; nil when it waits for nothing
	JourneyStatus string
}

// LockRun reads execution id within tx and locks it until tx ends, so one
// step of an execution runs at a time across processes. ErrNotFound when
// there is no such execution.
func (s *Store) LockRun(ctx context.Context, tx pgx.Tx, id string) (Run, error) {
	return scanRun(tx.QueryRow(ctx, sqlEngineLock, id), id)
}

// PeekRun reads execution id without a lock (what a step needs before its
// transaction: the engine calls the Mailer and the contacts store outside
// it, so a transaction never waits for a second pool connection).
func (s *Store) PeekRun(ctx context.Context, id string) (Run, error) {
	return scanRun(s.pg.QueryRow(ctx, sqlEnginePeek, id), id)
}

// RunKey names an execution and the envelope being handled for it.
type RunKey struct{ ID, CauseID string }

// Peeked is PeekRuns' answer for one RunKey: the execution (Err
// ErrNotFound when there is none), and whether the envelope ran steps
// before (Ran: it is a redelivery).
type Peeked struct {
	Run Run
	Ran bool
	Err error
}

// PeekRuns reads executions without a lock, as PeekRun, each with whether
// its envelope ran steps before (Ran: it is a redelivery), all in one
// statement (the engine's Batcher gathers concurrent handlers' reads). The
// error is the statement's; a missing execution is its Peeked's Err.
func (s *Store) PeekRuns(ctx context.Context, keys []RunKey) ([]Peeked, error) {
	ids, causes := make([]string, len(keys)), make([]string, len(keys))
	out := make([]Peeked, len(keys))
	for i, k := range keys {
		ids[i], causes[i] = k.ID, k.CauseID
		out[i].Err = ErrNotFound
	}
	rows, err := s.pg.Query(ctx, sqlEnginePeekCause, ids, causes)
	if err != nil {
		return nil, fmt.Errorf("read %d executions: %w", len(keys), err)
	}
	defer rows.Close()
	for rows.Next() {
		var ran bool
		var ord int64
		r, err := scanRun(rows, "", &ran, &ord)
		if err != nil {
			return nil, err
		}
		if ord < 1 || ord > int64(len(keys)) {
			return nil, fmt.Errorf("read %d executions: ordinal %d", len(keys), ord)
		}
		r.ID = keys[ord-1].ID
		out[ord-1] = Peeked{Run: r, Ran: ran}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %d executions: %w", len(keys), err)
	}
	return out, nil
}

// Advance is one step of an execution whose result is known before its
// lock (see AdvanceAll): the step's record, whether the execution waits
// for a wait that ended by Step.DoneAt (WakeEnded) or for nothing, and
// where it goes on (Next; "" when Step.Final ends it). Then, when not
// nil, is a second step that ran after Step under the same lock (the step
// a timer's wake-up leads to): it is recorded with Step, Next and
// Then.Final say where it leaves the execution, and Step.Final must be "".
type Advance struct {
	Step      StepRun
	Then      *StepRun
	WakeEnded bool
	Next      string
}

// Advanced is what one Advance did: Locked is false when the execution
// was not as expected (nothing was written: the caller takes the general
// path); Recorded is false when the step was recorded before.
type Advanced struct{ Locked, Recorded bool }

// AdvanceAll runs many Advances in one statement (engine_advance.sql):
// for each, when the execution is still active at Step.Address of an
// active journey, waiting for a wait that ended (WakeEnded) or not
// waiting, it locks the execution, records the step and moves it to Next
// or finishes it in Step.Final together, as LockRun, RecordStep and
// Move/Finish do in one transaction. The statement is one implicit
// transaction (an error fails them all, and none is written) and locks
// executions in id order, so that two never wait for each other in a
// cycle. Of several Advances of one execution only the first goes in; the
// others answer not Locked (the caller's general path looks).
func (s *Store) AdvanceAll(ctx context.Context, in []Advance) ([]Advanced, error) {
	out := make([]Advanced, len(in))
	n := len(in)
	ids, addr, typ, outcome, msg, detail, final, cause, next := make([]string, 0, n), make([]string, 0, n),
		make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n),
		make([]string, 0, n), make([]string, 0, n)
	wake, at := make([]bool, 0, n), make([]time.Time, 0, n)
	tAddr, tTyp, tOutcome, tMsg, tDetail := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n),
		make([]string, 0, n), make([]string, 0, n)
	idx := make([]int, 0, n)
	seen := make(map[string]bool, n)
	for i, a := range in {
		st := a.Step
		if seen[st.ExecutionID] {
			continue
		}
		seen[st.ExecutionID] = true
		idx = append(idx, i)
		ids, addr, wake, typ = append(ids, st.ExecutionID), append(addr, st.Address), append(wake, a.WakeEnded), append(typ, st.StepType)
		outcome, msg, detail, final = append(outcome, st.Outcome), append(msg, st.MessageID), append(detail, st.Detail), append(final, st.Final)
		cause, next, at = append(cause, st.CauseID), append(next, a.Next), append(at, st.DoneAt)
		var then StepRun
		if a.Then != nil {
			then = *a.Then
			final[len(final)-1] = then.Final
		}
		tAddr, tTyp, tOutcome = append(tAddr, then.Address), append(tTyp, then.StepType), append(tOutcome, then.Outcome)
		tMsg, tDetail = append(tMsg, then.MessageID), append(tDetail, then.Detail)
	}
	rows, err := s.pg.Query(ctx, sqlEngineAdvance, ids, addr, wake, typ, outcome, msg, detail, final, cause, next, at,
		tAddr, tTyp, tOutcome, tMsg, tDetail)
	if err != nil {
		return nil, fmt.Errorf("advance %d executions: %w", len(ids), err)
	}
	defer rows.Close()
	k := 0
	for rows.Next() {
		if k >= len(idx) {
			return nil, fmt.Errorf("advance %d executions: more answers than steps", len(ids))
		}
		a := &out[idx[k]]
		if err := rows.Scan(&a.Locked, &a.Recorded); err != nil {
			return nil, fmt.Errorf("advance %d executions: %w", len(ids), err)
		}
		k++
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("advance %d executions: %w", len(ids), err)
	}
	if k != len(idx) {
		return nil, fmt.Errorf("advance %d executions: %d answers", len(ids), k)
	}
	return out, nil
}

func scanRun(row pgx.Row, id string, more ...any) (Run, error) {
	r := Run{ID: id}
	var data []byte
	err := row.Scan(append([]any{&r.Workspace, &r.JourneyID, &r.Version, &r.ContactID, &r.Email,
		&r.State, &r.Position, &r.Trigger, &data, &r.StartedAt, &r.NextWakeAt, &r.JourneyStatus}, more...)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return Run{}, ErrNotFound
	}
	if err != nil {
		return Run{}, fmt.Errorf("read execution %s: %w", id, err)
	}
	r.Data = data
	if r.NextWakeAt != nil {
		t := r.NextWakeAt.UTC()
		r.NextWakeAt = &t
	}
	return r, nil
}

// Move sets active execution id's position to pos, waiting until wakeAt
// (nil: not waiting) for no event, within tx.
func (s *Store) Move(ctx context.Context, tx pgx.Tx, id, pos string, wakeAt *time.Time) error {
	return s.move(ctx, tx, id, pos, wakeAt, "")
}

// Wait sets active execution id's position to pos, waiting until until
// and, at a wait_for_event step, for event ("" for none), within tx: the
// matching stage finds it by the event (Waiting) until it moves again.
func (s *Store) Wait(ctx context.Context, tx pgx.Tx, id, pos string, until time.Time, event string) error {
	return s.move(ctx, tx, id, pos, &until, event)
}

func (s *Store) move(ctx context.Context, tx pgx.Tx, id, pos string, wakeAt *time.Time, waitEvent string) error {
	if _, err := tx.Exec(ctx, sqlEngineMove, id, pos, wakeAt, s.now().UTC(), nullable(waitEvent)); err != nil {
		return fmt.Errorf("move execution %s to %s: %w", id, pos, err)
	}
	return nil
}

// StepRun is one step an execution finished.
type StepRun struct {
	ExecutionID string
	Address     string
	StepType    string
	Outcome     string // a schemas.StepOutcome…
	MessageID   string
	Detail      string
	Final       string // the execution's final state when the step ended it
	CauseID     string // the envelope whose handling ran it
	DoneAt      time.Time
	// Read back by StepsCausedBy.
	Workspace, JourneyID, ContactID string
	Version                         int
	// Email is the contact's email as the step read it (its step-done
	// envelope carries it); read back as the contact's email now.
	Email string
}

// RecordStep records r within tx; ok is false when the step was recorded
// before (it ran already: the caller must not repeat its effects).
func (s *Store) RecordStep(ctx context.Context, tx pgx.Tx, r StepRun) (ok bool, err error) {
	tag, err := tx.Exec(ctx, sqlEngineStepInsert, r.ExecutionID, r.Address, r.StepType, r.Outcome, nullable(r.MessageID),
		nullable(r.Detail), nullable(r.Final), r.CauseID, r.DoneAt)
	if err != nil {
		return false, fmt.Errorf("record step %s of execution %s: %w", r.Address, r.ExecutionID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// StepsCausedBy returns the steps of execution execID the handling of
// envelope causeID ran, in order (a redelivered envelope returns their
// outputs again).
func (s *Store) StepsCausedBy(ctx context.Context, execID, causeID string) ([]StepRun, error) {
	rows, err := s.pg.Query(ctx, sqlEngineStepsByCause, execID, causeID)
	if err != nil {
		return nil, fmt.Errorf("steps run by %s: %w", causeID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (StepRun, error) {
		r := StepRun{CauseID: causeID}
		err := row.Scan(&r.ExecutionID, &r.Address, &r.StepType, &r.Outcome, &r.MessageID, &r.Detail, &r.Final, &r.DoneAt,
			&r.Workspace, &r.JourneyID, &r.Version, &r.ContactID, &r.Email)
		r.DoneAt = r.DoneAt.UTC()
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("steps run by %s: %w", causeID, err)
	}
	return out, nil
}

// Facts are what branch conditions read of a contact.
type Facts struct {
	Fields         map[string]string // email, firstName, country, language, status, source
	CustomFields   map[string]any
	LifetimeValue  float64
	PurchaseCount  int64
	LastPurchaseAt *time.Time
}

// Querier runs queries: a pool or a transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ContactFacts reads contact id's fields, custom fields and goal totals
// (ErrContactNotFound when it is gone).
func (s *Store) ContactFacts(ctx context.Context, q Querier, id string) (Facts, error) {
	var email, first, country, lang, status, source string
	var custom []byte
	f := Facts{}
	err := q.QueryRow(ctx, sqlEngineContact, id).Scan(&email, &first, &country, &lang, &status, &source, &custom,
		&f.LifetimeValue, &f.PurchaseCount, &f.LastPurchaseAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Facts{}, ErrContactNotFound
	}
	if err != nil {
		return Facts{}, fmt.Errorf("contact %s: %w", id, err)
	}
	f.Fields = map[string]string{"email": email, "firstName": first, "country": country, "language": lang,
		"status": status, "source": source}
	if len(custom) > 0 {
		if err := json.Unmarshal(custom, &f.CustomFields); err != nil {
			return Facts{}, fmt.Errorf("contact %s: custom fields: %w", id, err)
		}
	}
	return f, nil
}

// InList reports whether contact id has an ACTIVE membership of list.
func (s *Store) InList(ctx context.Context, q Querier, id, list string) (bool, error) {
	var in bool
	if err := q.QueryRow(ctx, sqlEngineInList, id, list).Scan(&in); err != nil {
		return false, fmt.Errorf("membership of %s in %s: %w", id, list, err)
	}
	return in, nil
}

// StepCount is how many executions finished one step with one outcome.
type StepCount struct {
	Step     string `json:"step"`
	StepType string `json:"stepType"`
	Outcome  string `json:"outcome"`
	Count    int64  `json:"count"`
}

// StepCounts counts the finished steps of journey id by step and outcome
// (emails sent per step: send_email steps with outcome sent).
func (s *Store) StepCounts(ctx context.Context, id string) ([]StepCount, error) {
	rows, err := s.pg.Query(ctx, sqlEngineStepCounts, id)
	if err != nil {
		return nil, fmt.Errorf("step counts of journey %s: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StepCount, error) {
		var c StepCount
		return c, r.Scan(&c.Step, &c.StepType, &c.Outcome, &c.Count)
	})
	if err != nil {
		return nil, fmt.Errorf("step counts of journey %s: %w", id, err)
	}
	return out, nil
}
