package journeymatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/journeys"
)

// NameCompleted is the registered name of the stage that announces
// completed executions.
const NameCompleted = "journeymatch.completed"

func init() {
	pipeline.Register(pipeline.Spec[Config]{
		Name:        NameCompleted,
		Consumes:    schemas.TopicJourneySteps,
		Produces:    []string{schemas.TopicWebhooks},
		Concurrency: 16,
		New: func(_ context.Context, r pipeline.Resources, _ Config) (pipeline.Stage, error) {
			if r.Postgres == nil {
				return nil, errors.New(NameCompleted + ": needs Postgres")
			}
			return NewCompleted(journeys.NewStore(r.Postgres, nil)), nil
		},
	})
}

// Completed turns the engine's step envelopes (TopicJourneySteps) whose
// step completed its execution (Final "completed": it ran out of steps)
// into JOURNEY_COMPLETED, with an id derived from the execution, so a
// redelivered step envelope returns the same envelope. Handle is safe for
// concurrent use.
type Completed struct {
	store *journeys.Store
}

var _ pipeline.Stage = (*Completed)(nil)

// NewCompleted returns the stage, reading executions from store.
func NewCompleted(store *journeys.Store) *Completed {
	return &Completed{store: store}
}

// Handle returns JOURNEY_COMPLETED for a step that completed its
// execution, nothing for any other envelope or for an execution whose
// contact is gone. A malformed envelope is a pipeline.Permanent error;
// a Postgres error is retried by the runner.
func (c *Completed) Handle(ctx context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	if env.Type != schemas.TypeJourneyStepDone {
		return nil, nil
	}
	var d schemas.JourneyStepDone
	if err := json.Unmarshal(env.Payload, &d); err != nil {
		return nil, pipeline.Permanent(fmt.Errorf("%s: envelope %s: decode payload: %w", NameCompleted, env.ID, err))
	}
	if d.Final != journeys.StateCompleted {
		return nil, nil
	}
	info, err := c.store.Info(ctx, env.Workspace, d.ExecutionID)
	if errors.Is(err, journeys.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: envelope %s: %w", NameCompleted, env.ID, err)
	}
	return []schemas.Envelope{schemas.JourneyWebhookEnvelope(env.Workspace, schemas.TypeWebhookJourneyCompleted, env.ID,
		schemas.JourneyWebhookData{JourneyID: info.JourneyID, JourneyName: info.JourneyName, ExecutionID: d.ExecutionID,
			Version: info.Version, ContactID: info.ContactID, Email: info.Email, OccurredAt: d.At})}, nil
}
