package journeymatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/journeys"
	"sendstream/sinks/ttlcache"
)

// Names of the stages that announce executions starting and completing.
// One Lifecycle is registered per topic it reads.
const (
	NameStarted   = "journeymatch.started"   // TopicJourneys: JOURNEY_STARTED
	NameCompleted = "journeymatch.completed" // TopicJourneySteps: JOURNEY_COMPLETED
)

func init() {
	types := map[string][]string{NameStarted: {schemas.TypeJourneyExecutionStarted}, NameCompleted: {schemas.TypeJourneyStepDone}}
	for name, topic := range map[string]string{NameStarted: schemas.TopicJourneys, NameCompleted: schemas.TopicJourneySteps} {
		pipeline.Register(pipeline.Spec[Config]{
			Name: name, Consumes: topic, Produces: []string{schemas.TopicWebhooks},
			Types:       types[name], // wakes and the rest of the topic pass undecoded
			Concurrency: 16,
			New: func(_ context.Context, r pipeline.Resources, _ Config) (pipeline.Stage, error) {
				if r.Postgres == nil {
					return nil, errors.New(name + ": needs Postgres")
				}
				return NewLifecycle(journeys.NewStore(r.Postgres, r.ClockOrSystem().Now)), nil
			},
		})
	}
}

// Lifecycle turns journey envelopes into webhook events: a started
// announcement (journey_execution.started.v1, whatever started it: the
// trigger endpoint, an event, a website event, a list join) into
// JOURNEY_STARTED, and the engine's step envelope whose step completed its
// execution (Final "completed": it ran out of steps) into
// JOURNEY_COMPLETED. Ids are derived from the execution id, so every
// redelivery returns the same envelope. Handle is safe for concurrent use.
type Lifecycle struct {
	store    *journeys.Store
	journeys *ttlcache.Cache[journeys.Journey] // workspace and id → the journey (JourneyTTL)
}

// JourneyTTL is how long Lifecycle reuses what it read of a journey for
// JOURNEY_STARTED (its name): one Postgres read per journey and second
// instead of one per started execution. A renamed journey's events carry
// the new name within JourneyTTL; they are asynchronous anyway (an event
// of an execution started before the rename may be made after it).
const JourneyTTL = time.Second

var _ pipeline.Stage = (*Lifecycle)(nil)

// NewLifecycle returns the stage, reading journeys and executions from
// store.
func NewLifecycle(store *journeys.Store) *Lifecycle {
	return &Lifecycle{store: store, journeys: ttlcache.NewCache[journeys.Journey](JourneyTTL)}
}

// Handle returns JOURNEY_STARTED or JOURNEY_COMPLETED, or nothing for any
// other envelope (wake-ups, steps that do not complete) or a journey or
// contact that is gone. A malformed envelope is a pipeline.Permanent
// error; a Postgres error is retried by the runner.
func (l *Lifecycle) Handle(ctx context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	switch env.Type {
	case schemas.TypeJourneyExecutionStarted:
		var p schemas.JourneyExecutionStarted
		if err := json.Unmarshal(env.Payload, &p); err != nil {
			return nil, pipeline.Permanent(fmt.Errorf("%s: envelope %s: decode payload: %w", NameStarted, env.ID, err))
		}
		j, err := l.journey(ctx, env.Workspace, p.JourneyID)
		if errors.Is(err, journeys.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: envelope %s: %w", NameStarted, env.ID, err)
		}
		return []schemas.Envelope{schemas.JourneyWebhookEnvelope(env.Workspace, schemas.TypeWebhookJourneyStarted, env.ID,
			schemas.JourneyWebhookData{JourneyID: p.JourneyID, JourneyName: j.Name, ExecutionID: p.ExecutionID, Version: p.Version,
				ContactID: p.ContactID, Email: p.Email, Trigger: p.Trigger, OccurredAt: p.StartedAt})}, nil
	case schemas.TypeJourneyStepDone:
		if !bytes.Contains(env.Payload, finalKey) {
			return nil, nil // a step that did not end its execution: most of them
		}
		d, err := schemas.DecodeJourneyStepDone(env.Payload)
		if err != nil {
			return nil, pipeline.Permanent(fmt.Errorf("%s: envelope %s: decode payload: %w", NameCompleted, env.ID, err))
		}
		if d.Final != journeys.StateCompleted {
			return nil, nil
		}
		info, err := l.info(ctx, env.Workspace, d)
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
	return nil, nil
}

// finalKey is in every step-done payload whose step ended its execution
// (Final is omitted while it goes on, and the engine writes keys
// unescaped); a payload without it is not decoded. A detail reading
// "final" only costs the decode.
var finalKey = []byte(`"final"`)

// journey returns journey id of workspace ws, reusing what it read within
// JourneyTTL.
func (l *Lifecycle) journey(ctx context.Context, ws, id string) (journeys.Journey, error) {
	return l.journeys.Get(ctx, ws+"\x00"+id, func(ctx context.Context) (journeys.Journey, error) {
		return l.store.Get(ctx, ws, id)
	})
}

// info is what JOURNEY_COMPLETED says of the execution of step d: from
// the step-done envelope and the journey's name when the envelope carries
// the contact's email (the engine's do), else read from the execution.
func (l *Lifecycle) info(ctx context.Context, ws string, d schemas.JourneyStepDone) (journeys.ExecutionInfo, error) {
	if d.Email == "" || d.JourneyID == "" || d.ContactID == "" {
		return l.store.Info(ctx, ws, d.ExecutionID)
	}
	j, err := l.journey(ctx, ws, d.JourneyID)
	if err != nil {
		return journeys.ExecutionInfo{}, err
	}
	return journeys.ExecutionInfo{JourneyID: d.JourneyID, JourneyName: j.Name, Version: d.Version, ContactID: d.ContactID, Email: d.Email}, nil
}
