// Package journeymatch starts and converts journey executions from what
// contacts do (issue 26 items 3 and 5). It reads the contacts topic:
//
//   - contact.event_matched.v1 (the goals stage's hand-off of a recorded
//     event that matched a contact) first converts the contact's running
//     executions whose version's exitOn names the event or its goal type
//     (state converted, with the goal's value, counted in the journey's
//     revenue), then starts the active `event` journeys listening for the
//     event's name, or the `website_event` ones for an event from
//     /public/events, with the event's properties as the trigger's data;
//     It also wakes the contact's executions waiting for the event's name
//     at a wait_for_event step (waits.go) when the event came from
//     /v1/events or an import;
//   - contact.joined_list.v1 (a membership became ACTIVE: subscribe,
//     a form without double opt-in, a confirmation click, a journey step)
//     starts the active `list_joined` journeys of that list, with
//     {"listId","listName"} as the trigger's data, except a journey whose
//     own execution's add_to_list step made the join (or one that
//     execution descends from: journeys.ErrLoop).
//
// Each start returns the execution's started announcement (TopicJourneys,
// for the engine in stages/journeys); each conversion returns
// JOURNEY_CONVERTED (TopicWebhooks). Re-entry rules are the store's: a
// refused start is no error and returns nothing.
//
// Exactly once: the execution id is derived from the envelope and journey
// (journeys.MatchedExecutionID), so a redelivered envelope finds the
// executions its first delivery started and returns the same envelopes
// (ids derived from the execution) instead of starting more; a redelivered
// converting event finds the executions it converted. The Lifecycle stages
// of this package (lifecycle.go) announce every started execution
// (JOURNEY_STARTED, the trigger endpoint's too) and every completed one
// (JOURNEY_COMPLETED).
package journeymatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/journeys"
	"sendstream/sinks/ttlcache"
	"sendstream/sinks/webhook"
)

// Name is the matching stage's registered name (and so its consumer
// group's).
const Name = "journeymatch"

// Config configures the matching stage; it has no settings yet.
type Config struct{}

func init() {
	pipeline.Register(pipeline.Spec[Config]{
		Name:     Name,
		Consumes: schemas.TopicContacts,
		Produces: []string{schemas.TopicJourneys, schemas.TopicWebhooks},
		Route:    Route,
		// Handle acts on these two; the contacts topic's other types (every
		// contact change) pass undecoded.
		Types: []string{schemas.TypeEventMatched, schemas.TypeContactJoinedList},
		// The topic carries every contact change; batched fetches (see
		// pipeline.BusyFetchBytes) keep passing over them cheap.
		FetchMinBytes: pipeline.BusyFetchBytes, FetchMaxWait: pipeline.BusyFetchWait,
		// One contact's envelopes in order (key "<workspace>:<contactId>"),
		// different contacts concurrently.
		Concurrency: 16,
		// Both payload decoders (DecodeEventPayload, json.Unmarshal)
		// refuse whatever json.Valid refuses; every event's hand-off
		// passes here, mostly for workspaces without journeys.
		UncheckedPayload: true,
		New: func(_ context.Context, r pipeline.Resources, _ Config) (pipeline.Stage, error) {
			if r.Postgres == nil {
				return nil, errors.New(Name + ": needs Postgres")
			}
			return New(r.Postgres, journeys.NewStore(r.Postgres, r.ClockOrSystem().Now)), nil
		},
	})
}

// Route sends started announcements and event wake-ups to the journeys
// topic and JOURNEY_CONVERTED to the webhooks topic.
func Route(out schemas.Envelope) string {
	if out.Type == schemas.TypeJourneyExecutionStarted || out.Type == schemas.TypeJourneyEventWake {
		return schemas.TopicJourneys
	}
	return schemas.TopicWebhooks
}

// Stage is the matching stage. Handle is safe for concurrent use.
type Stage struct {
	pg    *pgxpool.Pool
	store *journeys.Store
	// has caches, per workspace, whether it has a journey that is not
	// archived, for webhook.TargetTTL: most workspaces have none, and
	// each matched event asked Postgres twice (conversions, listening
	// journeys) to hear so. A journey created or activated thus starts
	// matching within that time.
	has *ttlcache.Cache[bool]
}

var (
	_ pipeline.Stage       = (*Stage)(nil)
	_ pipeline.KindIgnorer = (*Stage)(nil)
)

// New returns the matching stage on pg, starting executions in store.
func New(pg *pgxpool.Pool, store *journeys.Store) *Stage {
	return &Stage{pg: pg, store: store, has: ttlcache.NewCache[bool](webhook.TargetTTL)}
}

// Ignores reports (pipeline.Ignorer) that Handle would return nothing for
// env: IgnoresKind of its type and workspace.
func (s *Stage) Ignores(env *schemas.Envelope) bool {
	return s.IgnoresKind(env.Type, env.Workspace)
}

// IgnoresKind reports (pipeline.KindIgnorer) that Handle would return
// nothing for an envelope of type typ in workspace ws: a type it does not
// match, or a workspace the cache knows has no journey (within the cache's
// TTL, as Handle would). Without a cached answer it returns false and
// Handle asks Postgres.
func (s *Stage) IgnoresKind(typ, ws string) bool {
	if typ != schemas.TypeEventMatched && typ != schemas.TypeContactJoinedList {
		return true
	}
	has, ok := s.has.Peek(ws)
	return ok && !has
}

// Handle converts and starts executions for a matched event or a list
// join and returns what to publish; other types return nothing. A
// malformed envelope is a pipeline.Permanent error; a Postgres error is
// returned for the runner to retry (what committed before it is found
// again by the retry).
func (s *Stage) Handle(ctx context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	if env.Type != schemas.TypeEventMatched && env.Type != schemas.TypeContactJoinedList {
		return nil, nil
	}
	has, err := s.has.Get(ctx, env.Workspace, func(ctx context.Context) (bool, error) {
		return s.store.HasJourneys(ctx, env.Workspace)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: envelope %s: %w", Name, env.ID, err)
	}
	if !has {
		return nil, nil
	}
	switch env.Type {
	case schemas.TypeEventMatched:
		return s.event(ctx, env)
	case schemas.TypeContactJoinedList:
		return s.listJoined(ctx, env)
	}
	return nil, nil
}

// event handles contact.event_matched.v1.
func (s *Stage) event(ctx context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	p, err := schemas.DecodeEventPayload(env.Payload)
	if err != nil {
		return nil, pipeline.Permanent(fmt.Errorf("%s: envelope %s: decode payload: %w", Name, env.ID, err))
	}
	if p.ContactID == "" {
		return nil, nil // no contact: nothing starts or converts
	}
	if env.ID == "" || env.Workspace == "" || p.Event == "" {
		return nil, pipeline.Permanent(fmt.Errorf("%s: envelope %q: missing id, workspace or event", Name, env.ID))
	}
	eventID := env.CausationID // the goals stage's hand-off names the event
	if eventID == "" {
		eventID = env.ID
	}
	out, err := s.convert(ctx, env, &p, eventID)
	if err != nil {
		return nil, err
	}
	woken, err := s.wake(ctx, env, &p, eventID)
	if err != nil {
		return nil, err
	}
	out = append(out, woken...)
	trigger := schemas.TriggerEvent
	if p.Source == schemas.EventSourcePublic {
		trigger = schemas.TriggerWebsiteEvent
	}
	started, err := s.startAll(ctx, env, trigger, p.Event, journeys.StartInput{
		Workspace: env.Workspace, Trigger: trigger, ContactID: p.ContactID, SourceID: eventID, Data: p.Properties,
	})
	return append(out, started...), err
}

// listJoined handles contact.joined_list.v1.
func (s *Stage) listJoined(ctx context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	var p schemas.ListMembershipPayload
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		return nil, pipeline.Permanent(fmt.Errorf("%s: envelope %s: decode payload: %w", Name, env.ID, err))
	}
	if p.ContactID == "" {
		return nil, nil
	}
	if env.ID == "" || env.Workspace == "" || p.ListID == "" {
		return nil, pipeline.Permanent(fmt.Errorf("%s: envelope %q: missing id, workspace or list", Name, env.ID))
	}
	data, err := json.Marshal(map[string]string{"listId": p.ListID, "listName": p.ListName})
	if err != nil {
		return nil, fmt.Errorf("%s: envelope %s: encode trigger data: %w", Name, env.ID, err)
	}
	// A join an add_to_list step made names the step in its causation id:
	// the store refuses to restart that execution's journey (or one of
	// its ancestry) from it, so steps cannot loop a journey.
	causedBy, _ := schemas.ParseJourneyStepKey(env.CausationID)
	return s.startAll(ctx, env, schemas.TriggerListJoined, p.ListID, journeys.StartInput{
		Workspace: env.Workspace, Trigger: schemas.TriggerListJoined, ContactID: p.ContactID, SourceID: env.ID, Data: data,
		CausedBy: causedBy,
	})
}

// startAll starts base on every active journey of trigger listening for
// what, each in its own transaction, and returns the started
// announcements of the starts the store accepted (or found: a
// redelivery).
func (s *Stage) startAll(ctx context.Context, env schemas.Envelope, trigger, what string, base journeys.StartInput) ([]schemas.Envelope, error) {
	js, err := s.store.Listening(ctx, env.Workspace, trigger, what)
	if err != nil {
		return nil, fmt.Errorf("%s: envelope %s: %w", Name, env.ID, err)
	}
	var out []schemas.Envelope
	for _, j := range js {
		in := base
		in.JourneyID, in.ExecutionID = j.ID, journeys.MatchedExecutionID(env.ID, j.ID)
		if len(in.Data) == 0 {
			in.Data = nil
		}
		var e journeys.Execution
		err := pgx.BeginFunc(ctx, s.pg, func(tx pgx.Tx) error {
			var err error
			e, err = s.store.Start(ctx, tx, in)
			return err
		})
		if refused(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: envelope %s: %w", Name, env.ID, err)
		}
		out = append(out, journeys.StartedEnvelope(e, env.ID))
	}
	return out, nil
}

// refused reports a start the store refused for a reason a retry would not
// change now: re-entry, the contact's status or absence, a journey
// paused, archived or changed since Listening read it, or a start its own
// steps caused (ErrLoop).
func refused(err error) bool {
	for _, r := range []error{journeys.ErrReentry, journeys.ErrContactNotActive, journeys.ErrContactNotFound,
		journeys.ErrNotActive, journeys.ErrWrongTrigger, journeys.ErrNotFound, journeys.ErrLoop} {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}

// convert ends the contact's running executions that p converts and
// returns their JOURNEY_CONVERTED envelopes (again for those a first
// delivery converted).
func (s *Stage) convert(ctx context.Context, env schemas.Envelope, p *schemas.EventPayload, eventID string) ([]schemas.Envelope, error) {
	var value *float64
	if p.Value != "" {
		v, err := strconv.ParseFloat(p.Value, 64)
		if err != nil {
			return nil, pipeline.Permanent(fmt.Errorf("%s: envelope %s: value %q: %w", Name, env.ID, p.Value, err))
		}
		value = &v
	}
	since := p.ReceivedAt
	if since.IsZero() {
		since = p.OccurredAt
	}
	var convs []journeys.Conversion
	err := pgx.BeginFunc(ctx, s.pg, func(tx pgx.Tx) error {
		var err error
		convs, err = s.store.Convert(ctx, tx, journeys.ConvertInput{Workspace: env.Workspace, ContactID: p.ContactID,
			Event: p.Event, GoalType: p.GoalType, Value: value, Since: since})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: envelope %s: %w", Name, env.ID, err)
	}
	out := make([]schemas.Envelope, 0, len(convs))
	for _, c := range convs {
		d := schemas.JourneyWebhookData{JourneyID: c.JourneyID, JourneyName: c.JourneyName, ExecutionID: c.ExecutionID,
			Version: c.Version, ContactID: c.ContactID, Email: c.Email, EventID: eventID, Event: p.Event,
			GoalType: p.GoalType, Currency: p.Currency, OccurredAt: p.OccurredAt}
		if c.Value != nil {
			d.Value = json.Number(strconv.FormatFloat(*c.Value, 'f', -1, 64))
		}
		out = append(out, schemas.JourneyWebhookEnvelope(env.Workspace, schemas.TypeWebhookJourneyConverted, env.ID, d))
	}
	return out, nil
}
