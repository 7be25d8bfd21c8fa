package journeys

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/engine_waiting.sql
	sqlEngineWaiting string
	//go:embed sql/engine_message.sql
	sqlEngineMessage string
)

// Waiting is an execution waiting at a wait_for_event step.
type Waiting struct {
	ExecutionID string
	Position    string // the address of the step it waits at
}

// Waiting returns the active executions of contact contactID in workspace
// ws that wait for event (the engine's Move recorded it when they entered
// their wait_for_event step), oldest first. The matching stage asks it for
// each recorded event of a contact and wakes each execution it returns.
func (s *Store) Waiting(ctx context.Context, ws, contactID, event string) ([]Waiting, error) {
	rows, err := s.pg.Query(ctx, sqlEngineWaiting, ws, contactID, event)
	if err != nil {
		return nil, fmt.Errorf("executions of contact %s waiting for %s: %w", contactID, event, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Waiting, error) {
		var w Waiting
		return w, r.Scan(&w.ExecutionID, &w.Position)
	})
	if err != nil {
		return nil, fmt.Errorf("executions of contact %s waiting for %s: %w", contactID, event, err)
	}
	return out, nil
}

// MessageStatus returns the status of transactional message id ("" when
// there is none): whether a send_email step stored its message.
func (s *Store) MessageStatus(ctx context.Context, id string) (string, error) {
	var st string
	err := s.pg.QueryRow(ctx, sqlEngineMessage, id).Scan(&st)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("message %s: %w", id, err)
	}
	return st, nil
}
