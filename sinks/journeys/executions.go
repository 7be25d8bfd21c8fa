package journeys

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"sendstream/schemas"
)

var (
	//go:embed sql/start_existing.sql
	sqlStartExisting string
	//go:embed sql/start_journey.sql
	sqlStartJourney string
	//go:embed sql/start_contact.sql
	sqlStartContact string
	//go:embed sql/start_enter.sql
	sqlStartEnter string
	//go:embed sql/start_insert.sql
	sqlStartInsert string
	//go:embed sql/start_cause.sql
	sqlStartCause string
	//go:embed sql/finish.sql
	sqlFinish string
	//go:embed sql/executions.sql
	sqlExecutions string
	//go:embed sql/stats.sql
	sqlStats string
)

// Execution states (journey_executions.state).
const (
	StateActive    = "active"    // at a step, or waiting at one
	StateCompleted = "completed" // ran out of steps
	StateExited    = "exited"    // an exit step
	StateConverted = "converted" // an exitOn event or goal
	StateCancelled = "cancelled" // the journey was archived
	StateFailed    = "failed"    // the engine gave up
)

// ExecutionStates lists every execution state.
var ExecutionStates = []string{StateActive, StateCompleted, StateExited, StateConverted, StateCancelled, StateFailed}

// Why a start was refused. The trigger endpoint maps them to its answers.
var (
	ErrContactNotFound  = errors.New("no contact with that email or id")
	ErrContactNotActive = errors.New("the contact is not ACTIVE")
	ErrNotActive        = errors.New("the journey is not active")
	ErrWrongTrigger     = errors.New("the journey does not start on this trigger")
	ErrReentry          = errors.New("the journey's reentry setting forbids another start for this contact")
	// ErrLoop: a step of an execution of this journey (or of one that a
	// step of this journey started, and so on) caused the start: a journey
	// never restarts itself for a contact through its own steps.
	ErrLoop = errors.New("a step of this journey's own execution for the contact caused the start")
)

// StartInput is one start of an execution.
type StartInput struct {
	Workspace string
	JourneyID string
	// Trigger is the trigger type the start comes from; a journey with
	// another trigger type is refused with ErrWrongTrigger.
	Trigger string
	// ContactID, or else Email (trimmed and lower-cased), names the
	// contact. A start never creates a contact.
	ContactID string
	Email     string
	// ExecutionID is the new execution's id. A start with the id of an
	// existing execution returns that one with Existing set (a retried
	// start: the matching stage derives it from the event's envelope id).
	ExecutionID string
	// SourceID is the event or membership that started it ("" for the
	// API); Data the trigger's data or the event's properties (JSON
	// object, or nil).
	SourceID string
	Data     json.RawMessage
	// CausedBy is the execution whose step caused the start (an
	// add_to_list step's list join: schemas.ParseJourneyStepKey of the
	// event's causation id), "" when no journey step did. A start is
	// refused with ErrLoop when the journey is that execution's own or one
	// of its ancestry; otherwise the new execution's ancestry is that
	// execution's plus its journey.
	CausedBy string
	// Wait, for StartMany (Start ignores it), is the first step of the
	// journey's version the caller saw when it is a wait StartsWaiting
	// accepts: the execution then starts in that wait if it starts on
	// that version.
	Wait *FirstWait
}

// Execution is a started execution.
type Execution struct {
	ID        string
	Workspace string
	JourneyID string
	Version   int
	ContactID string
	Email     string
	State     string
	Position  string
	Trigger   string
	SourceID  string
	Data      json.RawMessage
	StartedAt time.Time
	// NextWakeAt is set when StartMany started the execution waiting at
	// its first step until then, for WaitEvent ("" for none).
	NextWakeAt *time.Time
	WaitEvent  string
	// Existing reports that the execution was started before (by a start
	// with the same ExecutionID).
	Existing bool
}

// Start creates an execution within tx, the caller's transaction: the
// caller writes the execution's announcement (StartedEnvelope) in the
// same transaction (the trigger endpoint through the contacts outbox), or
// returns it from a stage's Handle (a redelivery finds the execution by
// its id and announces it again under the same envelope id). Checks, in
// order: the journey exists and is active (ErrNotFound, ErrNotActive) with
// in.Trigger (ErrWrongTrigger); the contact exists (ErrContactNotFound)
// and is ACTIVE (ErrContactNotActive); no step of this journey's own
// execution caused it (ErrLoop, see StartInput.CausedBy); the re-entry
// setting allows the
// start (ErrReentry), enforced by journey_entries' row lock, so racing
// starts for one contact on a once journey start exactly one execution.
// The journey row is share-locked until tx ends: archiving waits.
func (s *Store) Start(ctx context.Context, tx pgx.Tx, in StartInput) (Execution, error) {
	if in.ExecutionID == "" {
		return Execution{}, errors.New("start journey execution: no execution id")
	}
	if e, err := existing(ctx, tx, in); err == nil || !errors.Is(err, pgx.ErrNoRows) {
		return e, err
	}
	var status, trigger, reentry string
	var version int
	err := tx.QueryRow(ctx, sqlStartJourney, in.Workspace, in.JourneyID).Scan(&status, &trigger, &reentry, &version)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Execution{}, ErrNotFound
	case err != nil:
		return Execution{}, fmt.Errorf("start journey %s: %w", in.JourneyID, err)
	case status != schemas.JourneyActive:
		return Execution{}, ErrNotActive
	case trigger != in.Trigger:
		return Execution{}, ErrWrongTrigger
	}
	e := Execution{ID: in.ExecutionID, Workspace: in.Workspace, JourneyID: in.JourneyID, Version: version,
		State: StateActive, Position: "0", Trigger: in.Trigger, SourceID: in.SourceID, Data: in.Data,
		StartedAt: s.now().UTC().Truncate(time.Microsecond)}
	var cstatus string
	err = tx.QueryRow(ctx, sqlStartContact, in.Workspace, in.ContactID, in.Email).Scan(&e.ContactID, &e.Email, &cstatus)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Execution{}, ErrContactNotFound
	case err != nil:
		return Execution{}, fmt.Errorf("start journey %s: contact: %w", in.JourneyID, err)
	case cstatus != "ACTIVE":
		return Execution{}, ErrContactNotActive
	}
	ancestry, err := causeAncestry(ctx, tx, in)
	if err != nil {
		return Execution{}, err
	}
	var entries int64
	err = tx.QueryRow(ctx, sqlStartEnter, in.JourneyID, e.ContactID, reentry, e.StartedAt).Scan(&entries)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Execution{}, ErrReentry
	case err != nil:
		return Execution{}, fmt.Errorf("start journey %s: reentry guard: %w", in.JourneyID, err)
	}
	var data any
	if len(in.Data) > 0 {
		data = string(in.Data)
	}
	if _, err := tx.Exec(ctx, sqlStartInsert, e.ID, e.Workspace, e.JourneyID, e.Version, e.ContactID, e.Position,
		e.Trigger, nullable(e.SourceID), data, e.StartedAt, ancestry); err != nil {
		return Execution{}, fmt.Errorf("start journey %s: insert execution: %w", in.JourneyID, err)
	}
	return e, nil
}

// causeAncestry returns the ancestry of an execution in.CausedBy starts
// (nil when no journey step caused it), or ErrLoop when in.JourneyID is
// the causing execution's journey or in its ancestry. A causing execution
// that is gone (its contact or journey deleted) counts as none.
func causeAncestry(ctx context.Context, tx pgx.Tx, in StartInput) ([]string, error) {
	if in.CausedBy == "" {
		return nil, nil
	}
	var journey string
	var ancestry []string
	err := tx.QueryRow(ctx, sqlStartCause, in.CausedBy).Scan(&journey, &ancestry)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("start journey %s: causing execution %s: %w", in.JourneyID, in.CausedBy, err)
	}
	ancestry = append(ancestry, journey)
	if slices.Contains(ancestry, in.JourneyID) {
		return nil, ErrLoop
	}
	return ancestry, nil
}

// existing returns the execution with in.ExecutionID (pgx.ErrNoRows when
// there is none).
func existing(ctx context.Context, tx pgx.Tx, in StartInput) (Execution, error) {
	e := Execution{Workspace: in.Workspace, Existing: true}
	var data []byte
	err := tx.QueryRow(ctx, sqlStartExisting, in.ExecutionID).Scan(&e.ID, &e.JourneyID, &e.Version, &e.ContactID, &e.Email,
		&e.State, &e.Position, &e.Trigger, &e.SourceID, &data, &e.StartedAt)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Execution{}, err
		}
		return Execution{}, fmt.Errorf("start journey %s: look for execution %s: %w", in.JourneyID, in.ExecutionID, err)
	}
	e.Data, e.StartedAt = data, e.StartedAt.UTC()
	return e, nil
}

// StartedEnvelope is the announcement of a started execution on
// schemas.TopicJourneys: id derived from the execution id (the same on
// every publish), key "<workspace>:<contactId>", causation the request or
// envelope that started it.
func StartedEnvelope(e Execution, causationID string) schemas.Envelope {
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	payload, err := json.Marshal(schemas.JourneyExecutionStarted{
		ExecutionID: e.ID, JourneyID: e.JourneyID, Version: e.Version, ContactID: e.ContactID, Email: e.Email,
		Trigger: e.Trigger, Position: e.Position, StartedAt: e.StartedAt, SourceID: e.SourceID, Data: data,
		NextWakeAt: e.NextWakeAt,
	})
	if err != nil {
		// Data was validated as JSON by the caller; nothing else can fail.
		panic("journeys: encode the started payload: " + err.Error())
	}
	return schemas.Envelope{
		ID: schemas.JourneyStartedEnvelopeID(e.ID), Workspace: e.Workspace, Type: schemas.TypeJourneyExecutionStarted,
		Key: e.Workspace + ":" + e.ContactID, OccurredAt: e.StartedAt, CausationID: causationID, Payload: payload,
		PayloadCompact: true,
	}
}

// Finish ends active execution id of workspace ws in state (completed,
// exited, converted, failed) within tx, with the conversion's value for
// converted ones, and releases its re-entry guard (a once_at_a_time
// journey may start again for the contact). ok is false when the
// execution was not active (already finished: a retried step).
func (s *Store) Finish(ctx context.Context, tx pgx.Tx, ws, id, state string, value *float64) (ok bool, err error) {
	switch state {
	case StateCompleted, StateExited, StateConverted, StateFailed:
	default:
		return false, fmt.Errorf("finish execution %s: %q is not a final state", id, state)
	}
	var journey string
	err = tx.QueryRow(ctx, sqlFinish, id, ws, state, s.now().UTC(), value).Scan(&journey)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("finish execution %s: %w", id, err)
	}
	return true, nil
}

// ExecutionRow is one execution as `admin journey executions` lists it.
type ExecutionRow struct {
	ID         string     `json:"id"`
	ContactID  string     `json:"contactId"`
	Email      string     `json:"email"`
	Version    int        `json:"version"`
	State      string     `json:"state"`
	Position   string     `json:"currentStep"`
	StepType   string     `json:"currentStepType"`
	StartedAt  time.Time  `json:"startedAt"`
	NextWakeAt *time.Time `json:"nextWakeAt"`
	FinishedAt *time.Time `json:"finishedAt"`
}

// Executions lists the executions of journey id of workspace ws, newest
// first, in state ("" for all), at most limit; each with the type of the
// step it is at, read from its version.
func (s *Store) Executions(ctx context.Context, ws, id, state string, limit int) ([]ExecutionRow, error) {
	rows, err := s.pg.Query(ctx, sqlExecutions, id, ws, state, limit)
	if err != nil {
		return nil, fmt.Errorf("executions of journey %s: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ExecutionRow, error) {
		var e ExecutionRow
		err := r.Scan(&e.ID, &e.ContactID, &e.Email, &e.Version, &e.State, &e.Position, &e.StartedAt, &e.NextWakeAt, &e.FinishedAt)
		e.StartedAt = e.StartedAt.UTC()
		for _, t := range []*time.Time{e.NextWakeAt, e.FinishedAt} {
			if t != nil {
				*t = t.UTC()
			}
		}
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("executions of journey %s: %w", id, err)
	}
	versions := map[int]*schemas.JourneyDefinition{}
	for i := range out {
		e := &out[i]
		d, ok := versions[e.Version]
		if !ok {
			def, err := s.Version(ctx, id, e.Version)
			if err != nil {
				return nil, err
			}
			d = &def
			versions[e.Version] = d
		}
		if st, err := d.StepAt(e.Position); err == nil {
			e.StepType = st.Type
		}
	}
	return out, nil
}

// Stats are the counts of a journey's executions that exist now, and the
// emails its send_email steps sent.
type Stats struct {
	Entered   int64   `json:"entered"`
	Active    int64   `json:"active"`
	Completed int64   `json:"completed"`
	Exited    int64   `json:"exited"`
	Converted int64   `json:"converted"`
	Cancelled int64   `json:"cancelled"`
	Failed    int64   `json:"failed"`
	Revenue   float64 `json:"revenue"`
	// EmailsSent is the sum of Sent over EmailsPerStep.
	EmailsSent int64 `json:"emailsSent"`
	// EmailsPerStep lists the send_email steps of the current version
	// (zero counts included) and of older versions that sent or refused
	// an email, by version and address (see StepEmails).
	EmailsPerStep []StepEmails `json:"emailsPerStep"`
}

// Stats counts the executions of journey id of workspace ws and the
// emails of its send_email steps (ErrNotFound for another workspace's or
// no journey).
func (s *Store) Stats(ctx context.Context, ws, id string) (Stats, error) {
	j, err := s.Get(ctx, ws, id)
	if err != nil {
		return Stats{}, err
	}
	var st Stats
	err = s.pg.QueryRow(ctx, sqlStats, id).Scan(&st.Entered, &st.Active, &st.Completed, &st.Exited, &st.Converted,
		&st.Cancelled, &st.Failed, &st.Revenue)
	if err != nil {
		return Stats{}, fmt.Errorf("stats of journey %s: %w", id, err)
	}
	if st.EmailsPerStep, err = s.stepEmails(ctx, id, j.Version); err != nil {
		return Stats{}, err
	}
	for _, e := range st.EmailsPerStep {
		st.EmailsSent += e.Sent
	}
	return st, nil
}
