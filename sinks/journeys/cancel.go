package journeys

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"sendstream/schemas"
)

var (
	//go:embed sql/cancel_all.sql
	sqlCancelAll string
	//go:embed sql/outbox_insert.sql
	sqlOutboxInsert string
)

// SetOutboxScope sets the scope of the cancellations this Store writes into
// the contacts outbox when it archives a journey: the topic prefix of the
// deployment whose contacts relay publishes them (ingest/contacts'
// SetOutboxScope, migration 0054). The default is "", the scope of a
// deployment without a topic prefix. Call it before the Store is used.
func (s *Store) SetOutboxScope(scope string) { s.scope = scope }

// cancelAll ends every active execution of journey id as cancelled at now
// within tx (archiving) and writes one journey_execution.cancelled.v1 per
// execution into the contacts outbox in tx: the contacts relay publishes
// them on the journeys topic once its grace period has passed (the
// process that archives, the admin CLI, publishes nothing itself), where
// the journey log records them and the engine checks that no message of a
// step cut short stays stored and unpublished.
func (s *Store) cancelAll(ctx context.Context, tx pgx.Tx, id string, now time.Time) error {
	rows, err := tx.Query(ctx, sqlCancelAll, id, now)
	if err != nil {
		return fmt.Errorf("cancel executions: %w", err)
	}
	var wss, contacts, topics, envs []string
	var c schemas.JourneyExecutionCancelled
	var ws string
	_, err = pgx.ForEachRow(rows, []any{&c.ExecutionID, &ws, &c.ContactID, &c.Version, &c.Position}, func() error {
		c.JourneyID, c.At = id, now.UTC()
		env := schemas.JourneyCancelledEnvelope(ws, c)
		b, err := schemas.AppendEnvelope(nil, &env)
		if err != nil {
			return fmt.Errorf("encode the cancellation of %s: %w", c.ExecutionID, err)
		}
		wss, contacts = append(wss, ws), append(contacts, c.ContactID)
		topics, envs = append(topics, schemas.TopicJourneys), append(envs, string(b))
		return nil
	})
	if err != nil {
		return fmt.Errorf("cancel executions: %w", err)
	}
	if len(envs) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, sqlOutboxInsert, wss, contacts, topics, envs, s.scope); err != nil {
		return fmt.Errorf("cancel executions: write their cancellations to the outbox: %w", err)
	}
	return nil
}
