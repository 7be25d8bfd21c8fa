package journeys

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"sendstream/schemas"
)

//go:embed sql/matching.sql
var sqlMatching string

// Listening returns the active journeys of workspace ws whose trigger of
// type trigger (event, website_event or list_joined) listens for what: an
// event name, or a list id for list_joined. Matching (issue 26 item 3)
// calls it for each matched event or list join, then Start for each
// journey with MatchedExecutionID.
func (s *Store) Listening(ctx context.Context, ws, trigger, what string) ([]Journey, error) {
	switch trigger {
	case schemas.TriggerEvent, schemas.TriggerWebsiteEvent, schemas.TriggerListJoined:
	default:
		return nil, fmt.Errorf("journeys listening: %q is not an event or list trigger", trigger)
	}
	rows, err := s.pg.Query(ctx, sqlMatching, ws, trigger, what)
	if err != nil {
		return nil, fmt.Errorf("journeys listening for %s %s: %w", trigger, what, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Journey, error) { return scanJourney(r) })
	if err != nil {
		return nil, fmt.Errorf("journeys listening for %s %s: %w", trigger, what, err)
	}
	return out, nil
}

// MatchedExecutionID is the id of the execution that the envelope
// sourceEnvID (a matched event or list join) starts on journey journeyID:
// the same on every redelivery, so Start finds the execution a first
// delivery created instead of starting (or refusing) another.
func MatchedExecutionID(sourceEnvID, journeyID string) string {
	return schemas.IDFromKey(journeyID, "journey_execution", sourceEnvID)
}

//go:embed sql/workspace_has.sql
var sqlWorkspaceHas string

// HasJourneys reports whether workspace ws has a journey that is not
// archived: the matching stage asks it first, since most workspaces have
// none and every matched event would otherwise cost two queries.
func (s *Store) HasJourneys(ctx context.Context, ws string) (bool, error) {
	var ok bool
	if err := s.pg.QueryRow(ctx, sqlWorkspaceHas, ws).Scan(&ok); err != nil {
		return false, fmt.Errorf("journeys of workspace %s: %w", ws, err)
	}
	return ok, nil
}
