// Package goals is the stage that applies what a recorded event tells about
// its contact (spec 4.6): it reads event.recorded.v1 envelopes from the
// events topic and, for events that matched a contact,
//
//   - keeps the contact's activity in Postgres (contact_activity): the
//     last-activity time, and for goals the lifetime value (refunds
//     negative), the purchase count, the refund count and the last purchase
//     time, which goal-based segment rules read;
//   - publishes EVENT_RECORDED (webhook.event_recorded.v1) to the webhooks
//     topic, and for a goal GOAL_RECORDED (webhook.goal_recorded.v1) too,
//     when a target of the workspace wants it;
//   - publishes the "event name matched" hand-off
//     (contact.event_matched.v1) to the contacts topic, which journey
//     matching consumes to start journeys listening for the name, when
//     the workspace has a journey that is not archived.
//
// Both conditions are asked once per webhook.TargetTTL and workspace, the
// window in which the fan-out and journey matching themselves answer from
// their caches: most workspaces have neither webhooks for events nor
// journeys, and these envelopes tripled what each of their events cost
// the broker and this process.
//
// Events without a contact have no effect here.
//
// Exactly once: the stage deduplicates by envelope id. Buffered events are
// applied in Flush by one statement that records each goal's id in
// event_ledger and adds only goals the ledger did not hold, in the same
// transaction; the last-activity time is a maximum, idempotent by nature.
// A redelivered or republished event therefore changes nothing twice. The
// published envelopes get ChildID ids, so a replay republishes the same ids
// and consumers (webhook delivery, journey matching) deduplicate them.
package goals

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/breaker"
	"sendstream/sinks/journeys"
	"sendstream/sinks/ttlcache"
	"sendstream/sinks/webhook"
)

// Name is the stage's registered name (and so its consumer group's).
const Name = "goals"

var (
	//go:embed apply.sql
	applySQL string
	//go:embed prune.sql
	pruneSQL string
)

func init() {
	pipeline.Register(pipeline.Spec[Config]{
		Name:     Name,
		Consumes: schemas.TopicEvents,
		Produces: []string{schemas.TopicWebhooks, schemas.TopicContacts},
		Route:    Route,
		Defaults: Config{},
		New: func(ctx context.Context, r pipeline.Resources, cfg Config) (pipeline.Stage, error) {
			return New(ctx, r, cfg)
		},
	})
}

// Route sends EVENT_RECORDED and GOAL_RECORDED to the webhooks topic and
// the journey hand-off to the contacts topic.
func Route(out schemas.Envelope) string {
	if out.Type == schemas.TypeEventMatched {
		return schemas.TopicContacts
	}
	return schemas.TopicWebhooks
}

// Config configures the stage. Zero fields take the defaults.
type Config struct {
	// Breaker tunes the circuit breaker around Postgres.
	Breaker breaker.Config
	// LedgerRetention is how long an applied goal's id stays in
	// event_ledger (default 30 days). It must exceed the events topic's
	// retention and ingest's 24-hour republish window, the longest a copy
	// of an event can arrive after the first.
	LedgerRetention time.Duration
	// PruneEvery is how often old ledger entries are deleted (default 1h;
	// the first pass runs after a minute, or PruneEvery when shorter).
	PruneEvery time.Duration
}

func (c *Config) defaults() {
	if c.LedgerRetention <= 0 {
		c.LedgerRetention = 30 * 24 * time.Hour
	}
	if c.PruneEvery <= 0 {
		c.PruneEvery = time.Hour
	}
}

// Stage buffers matched events in Handle and applies them in Flush. The
// runner calls Handle and Flush from one goroutine; a mutex guards the
// buffer regardless.
type Stage struct {
	pg      *pgxpool.Pool
	breaker *breaker.Breaker
	// journeys answers whether a workspace has a journey that is not
	// archived; wants caches, per workspace and for webhook.TargetTTL,
	// what its matched events are published for.
	journeys *journeys.Store
	wants    *ttlcache.Cache[wants]

	mu   sync.Mutex
	buf  cols
	seen map[string]struct{}

	log  *slog.Logger
	stop context.CancelFunc
	done chan struct{}
}

// cols are the buffered events as the columns apply.sql takes.
type cols struct {
	ids, ws, contacts, goals, values []string
	at                               []time.Time
}

func (c *cols) reset() {
	c.ids, c.ws, c.contacts, c.goals, c.values = c.ids[:0], c.ws[:0], c.contacts[:0], c.goals[:0], c.values[:0]
	c.at = c.at[:0]
}

var (
	_ pipeline.Stage   = (*Stage)(nil)
	_ pipeline.Flusher = (*Stage)(nil)
	_ pipeline.Closer  = (*Stage)(nil)
)

// New builds the stage on r.Postgres (required) and starts its ledger
// pruning goroutine, which runs until Close. ctx only bounds construction.
func New(ctx context.Context, r pipeline.Resources, cfg Config) (*Stage, error) {
	if r.Postgres == nil {
		return nil, errors.New("goals: needs Postgres")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("goals: build: %w", err)
	}
	cfg.defaults()
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	runCtx, stop := context.WithCancel(context.Background())
	s := &Stage{
		pg: r.Postgres, breaker: cfg.Breaker.New("postgres_goals"), seen: map[string]struct{}{},
		journeys: journeys.NewStore(r.Postgres, nil), wants: ttlcache.NewCache[wants](webhook.TargetTTL),
		log: log.With("stage", Name), stop: stop, done: make(chan struct{}),
	}
	go s.prune(runCtx, cfg)
	return s, nil
}

// prune deletes ledger entries older than the retention, in chunks, every
// PruneEvery until ctx ends.
func (s *Stage) prune(ctx context.Context, cfg Config) {
	defer close(s.done)
	wait := min(time.Minute, cfg.PruneEvery)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = cfg.PruneEvery
		for {
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			tag, err := s.pg.Exec(cctx, pruneSQL, cfg.LedgerRetention.Seconds(), 10000)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("pruning the event ledger failed", "err", err)
				}
				break
			}
			if tag.RowsAffected() < 10000 {
				break
			}
		}
	}
}

// Close stops the pruning goroutine and waits for it.
func (s *Stage) Close() error {
	s.stop()
	<-s.done
	return nil
}

// Handle buffers a matched event.recorded.v1 envelope and returns the
// envelopes its workspace wants (published by the runner after Flush):
// EVENT_RECORDED and, for a goal, GOAL_RECORDED when a webhook target
// wants them, the journey hand-off when it has journeys. Unmatched events
// and other types are ignored. A malformed envelope is a
// pipeline.Permanent error; a failed lookup of the workspace's targets is
// returned for the runner to retry.
func (s *Stage) Handle(ctx context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	if env.Type != schemas.TypeEventRecorded {
		return nil, nil
	}
	p, err := schemas.DecodeEventPayload(env.Payload)
	if err != nil {
		return nil, pipeline.Permanent(fmt.Errorf("goals: envelope %s: decode payload: %w", env.ID, err))
	}
	if p.ContactID == "" {
		return nil, nil
	}
	if env.ID == "" || env.Workspace == "" || p.Event == "" {
		return nil, pipeline.Permanent(fmt.Errorf("goals: envelope %q: missing id, workspace or event", env.ID))
	}
	if p.Value != "" && !json.Valid([]byte(p.Value)) {
		return nil, pipeline.Permanent(fmt.Errorf("goals: envelope %s: value %q is not a number", env.ID, p.Value))
	}
	w, err := s.wants.Get(ctx, env.Workspace, func(ctx context.Context) (wants, error) {
		return s.lookup(ctx, env.Workspace)
	})
	if err != nil {
		return nil, fmt.Errorf("goals: envelope %s: %w", env.ID, err)
	}
	s.mu.Lock()
	if _, dup := s.seen[env.ID]; !dup {
		s.seen[env.ID] = struct{}{}
		b := &s.buf
		b.ids = append(b.ids, env.ID)
		b.ws = append(b.ws, env.Workspace)
		b.contacts = append(b.contacts, p.ContactID)
		b.goals = append(b.goals, p.GoalType)
		b.values = append(b.values, p.Value)
		b.at = append(b.at, p.OccurredAt.UTC())
	}
	s.mu.Unlock()
	return outputs(env, &p, w), nil
}

// wants is what a workspace's matched events are published for.
type wants struct {
	eventRecorded, goalRecorded bool // a webhook target wants EVENT_RECORDED, GOAL_RECORDED
	journeys                    bool // it has a journey that is not archived
}

// lookup asks Postgres what ws's matched events are published for.
func (s *Stage) lookup(ctx context.Context, ws string) (wants, error) {
	hooks, err := webhook.Wanted(ctx, s.pg, ws, webhookNames)
	if err != nil {
		return wants{}, err
	}
	j, err := s.journeys.HasJourneys(ctx, ws)
	if err != nil {
		return wants{}, err
	}
	return wants{eventRecorded: hooks[webhookEventRecorded], goalRecorded: hooks[schemas.WebhookGoalRecorded], journeys: j}, nil
}

// The public names of the webhook events this stage publishes.
var (
	webhookEventRecorded = schemas.EventWebhookEvents[schemas.TypeWebhookEventRecorded]
	webhookNames         = []string{webhookEventRecorded, schemas.WebhookGoalRecorded}
)

// outputs are the envelopes a matched event produces for what w says is
// wanted.
func outputs(env schemas.Envelope, p *schemas.EventPayload, w wants) []schemas.Envelope {
	goal := p.GoalType != "" && w.goalRecorded
	if !w.eventRecorded && !goal && !w.journeys {
		return nil
	}
	key := env.Workspace + ":" + p.ContactID
	// The webhook data, built only when a webhook envelope carries it;
	// compact when the payload it copies from was (its properties are a
	// span of it) and the value is a plain number.
	var data []byte
	var compact bool
	if w.eventRecorded || goal {
		data = schemas.AppendEventRecordedData(make([]byte, 0, 256+len(p.Properties)), &schemas.EventRecordedData{
			EventID: env.ID, Event: p.Event, ContactID: p.ContactID, Email: p.Email, GoalType: p.GoalType,
			Value: json.Number(p.Value), Currency: p.Currency, ExternalID: p.ExternalID,
			OccurredAt: p.OccurredAt, Properties: p.Properties,
		})
		compact = env.PayloadCompact && plainNumber(p.Value)
	}
	outs := make([]schemas.Envelope, 0, 3)
	if w.eventRecorded {
		outs = append(outs, schemas.Envelope{
			ID: schemas.ChildID(env.ID, schemas.TypeWebhookEventRecorded, 0), Workspace: env.Workspace,
			Type: schemas.TypeWebhookEventRecorded, Key: key, OccurredAt: p.OccurredAt, CausationID: env.ID,
			Traceparent: env.Traceparent, Payload: data, PayloadCompact: compact,
		})
	}
	if w.journeys {
		outs = append(outs, schemas.Envelope{
			ID: schemas.ChildID(env.ID, schemas.TypeEventMatched, 0), Workspace: env.Workspace,
			Type: schemas.TypeEventMatched, Key: key, OccurredAt: p.OccurredAt, CausationID: env.ID,
			Traceparent: env.Traceparent, Payload: env.Payload, PayloadCompact: env.PayloadCompact,
		})
	}
	if goal {
		// GOAL_RECORDED: the same data, under an id of its own that
		// every copy of the event shares (returned again on a redelivery,
		// like EVENT_RECORDED: the ledger decides what is counted, the
		// id what receivers see once).
		outs = append(outs, schemas.Envelope{
			ID: schemas.ChildID(env.ID, schemas.TypeWebhookGoalRecorded, 0), Workspace: env.Workspace,
			Type: schemas.TypeWebhookGoalRecorded, Key: key, OccurredAt: p.OccurredAt, CausationID: env.ID,
			Traceparent: env.Traceparent, Payload: data, PayloadCompact: compact,
		})
	}
	return outs
}

// plainNumber reports whether v is empty or made only of the characters of
// a JSON number (no whitespace, nothing json.Marshal would escape).
func plainNumber(v string) bool {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= '0' && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
		default:
			return false
		}
	}
	return true
}

// Flush applies every buffered event in one statement and empties the
// buffer only when it committed. On error the events stay buffered and the
// runner does not commit; a later Flush retries them (the ledger makes the
// retry safe even if the failed attempt did commit).
func (s *Stage) Flush(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := &s.buf
	if len(b.ids) == 0 {
		return nil
	}
	err := s.breaker.Do(ctx, func(ctx context.Context) error {
		_, err := s.pg.Exec(ctx, applySQL, b.ids, b.ws, b.contacts, b.goals, b.values, b.at)
		return err
	})
	if err != nil {
		return fmt.Errorf("goals: apply %d events: %w", len(b.ids), err)
	}
	b.reset()
	clear(s.seen)
	return nil
}
