package journeys

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/convert.sql
	sqlConvert string
	//go:embed sql/execution_info.sql
	sqlExecutionInfo string
)

// Conversion is an execution an exitOn event or goal converted.
type Conversion struct {
	ExecutionID string
	JourneyID   string
	JourneyName string
	Version     int
	ContactID   string
	Email       string
	// Value is the conversion's value (the goal's), nil when none.
	Value *float64
	// Existing reports an execution converted before this call (a
	// redelivered event finds what its first delivery converted).
	Existing bool
}

// ConvertInput is one recorded event of a contact that may convert its
// running executions.
type ConvertInput struct {
	Workspace string
	ContactID string
	Event     string   // the event's name
	GoalType  string   // the goal's type, "" for a plain event
	Value     *float64 // the goal's value, nil when none
	// Since is when the event was received: executions converted at or
	// after it are returned again with Existing set, so a redelivered
	// event announces its conversions again (under ids derived from the
	// execution, so receivers see each once).
	Since time.Time
}

// Convert ends, within tx, every active execution of in.ContactID whose
// version's exitOn names in.Event (or in.GoalType) as converted with
// in.Value (Finish), and returns them with those converted since in.Since.
// Rows are locked in start order, so concurrent calls for one contact
// serialise; the execution engine holds the same row lock while it runs a
// step, and a converted execution's later wake-ups find it not active.
func (s *Store) Convert(ctx context.Context, tx pgx.Tx, in ConvertInput) ([]Conversion, error) {
	rows, err := tx.Query(ctx, sqlConvert, in.Workspace, in.ContactID, in.Event, in.GoalType, in.Since.UTC())
	if err != nil {
		return nil, fmt.Errorf("convert executions of contact %s: %w", in.ContactID, err)
	}
	type row struct {
		c     Conversion
		state string
	}
	found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		var finished *time.Time
		err := r.Scan(&x.c.ExecutionID, &x.c.JourneyID, &x.c.JourneyName, &x.c.Version, &x.c.ContactID, &x.c.Email,
			&x.state, &x.c.Value, &finished)
		return x, err
	})
	if err != nil {
		return nil, fmt.Errorf("convert executions of contact %s: %w", in.ContactID, err)
	}
	out := make([]Conversion, 0, len(found))
	for _, x := range found {
		if x.state != StateActive {
			x.c.Existing = true
			out = append(out, x.c)
			continue
		}
		ok, err := s.Finish(ctx, tx, in.Workspace, x.c.ExecutionID, StateConverted, in.Value)
		if err != nil {
			return nil, err
		}
		if ok {
			x.c.Value = in.Value
			out = append(out, x.c)
		}
	}
	return out, nil
}

// ExecutionInfo is what the journey webhook events say about an execution.
type ExecutionInfo struct {
	JourneyID   string
	JourneyName string
	Version     int
	ContactID   string
	Email       string
	State       string
	FinishedAt  *time.Time
}

// Info returns execution id of workspace ws with its journey's name and
// its contact's email (ErrNotFound when there is none, e.g. the contact
// was deleted).
func (s *Store) Info(ctx context.Context, ws, id string) (ExecutionInfo, error) {
	var e ExecutionInfo
	err := s.pg.QueryRow(ctx, sqlExecutionInfo, id, ws).Scan(&e.JourneyID, &e.JourneyName, &e.Version, &e.ContactID,
		&e.Email, &e.State, &e.FinishedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return ExecutionInfo{}, ErrNotFound
	}
	if err != nil {
		return ExecutionInfo{}, fmt.Errorf("execution %s: %w", id, err)
	}
	return e, nil
}
