// Package webhookfanout turns domain events into outgoing webhook
// deliveries (spec 2.5, 2.6, 6; issue 25). For each envelope whose type has
// a public webhook name (schemas.ContactWebhookEvents on TopicContacts,
// schemas.EventWebhookEvents and schemas.TransactionalWebhookEvents on
// TopicWebhooks) it builds the delivery body of spec 2.6 and returns one
// schemas.TypeWebhookDelivery per matching target, keyed
// "<workspace>:<targetId>/<messageId>" (one key per message and target, so
// the delivery stage runs one endpoint's deliveries concurrently, within
// its per-target bound); the delivery stage (stages/webhookdelivery) sends
// them. A stage reads one topic, so one stage is registered per
// source topic, sharing this code.
//
// Targets come from Sources, one per target kind: REST hook subscriptions
// (webhook.RESTHooks) and dashboard endpoints (webhook.EndpointStore, which
// needs Settings["secret"]).
package webhookfanout

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/webhook"
)

// Stage names.
const (
	NameContacts = "webhookfanout.contacts"
	NameWebhooks = "webhookfanout.webhooks"
)

// Source finds the targets of one kind that want an event of a workspace.
// Safe for concurrent use; an error is retried by the runner.
type Source interface {
	Matching(ctx context.Context, ws, event string) ([]webhook.Hook, error)
}

// Config configures a fan-out stage.
type Config struct {
	// Events maps the envelope types this stage fans out to public names.
	Events map[string]string
}

func init() {
	register(NameContacts, schemas.TopicContacts, schemas.ContactWebhookEvents)
	events := map[string]string{}
	for _, m := range []map[string]string{schemas.EventWebhookEvents, schemas.TransactionalWebhookEvents} {
		for k, v := range m {
			events[k] = v
		}
	}
	register(NameWebhooks, schemas.TopicWebhooks, events)
}

func register(name, topic string, events map[string]string) {
	types := make([]string, 0, len(events))
	for t := range events {
		types = append(types, t)
	}
	pipeline.Register(pipeline.Spec[Config]{
		Name: name, Consumes: topic, Produces: []string{schemas.TopicWebhookDeliveries},
		Defaults: Config{Events: events},
		// Handle ignores other types; the runner passes over them undecoded.
		Types: types,
		// The topic carries every contact change; batched fetches (see
		// pipeline.BusyFetchBytes) keep passing over them cheap.
		FetchMinBytes: pipeline.BusyFetchBytes, FetchMaxWait: pipeline.BusyFetchWait,
		// Concurrent lookups for different keys; one contact's events stay
		// in order.
		Concurrency: 32,
		// Handle parses a payload with encoding/json, which refuses all
		// but one valid JSON value, and only when a target wants it: the
		// runner skips its own pass over every payload.
		UncheckedPayload: true,
		New: func(_ context.Context, r pipeline.Resources, cfg Config) (pipeline.Stage, error) {
			if r.Postgres == nil {
				return nil, fmt.Errorf("%s: needs Postgres", name)
			}
			eps, err := webhook.NewEndpointStore(r.Postgres, webhook.EndpointStoreConfig{Secret: r.Settings["secret"]})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			return New(cfg.Events, cached(webhook.NewRESTHooks(r.Postgres), TargetTTL), cached(eps, TargetTTL)), nil
		},
	})
}

// Stage is a fan-out stage. Handle and Ignores are safe for concurrent use.
type Stage struct {
	events  map[string]string
	sources []Source
	fields  sync.Map // event name → map[string]bool of documented data properties
}

// New returns a fan-out for the envelope types in events, finding targets
// in sources.
func New(events map[string]string, sources ...Source) *Stage {
	return &Stage{events: events, sources: sources}
}

// peeker is a Source that can answer from a cache without a lookup.
type peeker interface {
	Peek(ws, event string) (hooks []webhook.Hook, ok bool)
}

// Ignores reports (pipeline.Ignorer) that Handle would return nothing for
// env: IgnoresKind of its type and workspace.
func (s *Stage) Ignores(env *schemas.Envelope) bool {
	return s.IgnoresKind(env.Type, env.Workspace)
}

// IgnoresKind reports (pipeline.KindIgnorer) that Handle would return
// nothing for an envelope of type typ in workspace ws: the type is not
// fanned out, or every source's cache says no target wants its event
// (within the targets' TTL, as Handle would). Without a cached answer it
// returns false and Handle looks the targets up. The runner asks it from
// the record headers, so most envelopes (workspaces without webhooks) are
// passed over undecoded.
func (s *Stage) IgnoresKind(typ, ws string) bool {
	name, ok := s.events[typ]
	if !ok {
		return true
	}
	for _, src := range s.sources {
		p, ok := src.(peeker)
		if !ok {
			return false
		}
		if hooks, ok := p.Peek(ws, name); !ok || len(hooks) > 0 {
			return false
		}
	}
	return true
}

// Handle returns one delivery per target that wants env's public event,
// nothing for an internal type or an event that matched no contact (spec
// 4.6). Pure: the same envelope gives the same deliveries (ids, bodies).
func (s *Stage) Handle(ctx context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	name, ok := s.events[env.Type]
	if !ok {
		return nil, nil
	}
	// Targets first: most events have none, and then the payload is
	// never decoded.
	var hooks []webhook.Hook
	for _, src := range s.sources {
		hs, err := src.Matching(ctx, env.Workspace, name)
		if err != nil {
			return nil, fmt.Errorf("webhook fan-out %s: %w", env.ID, err)
		}
		hooks = append(hooks, hs...)
	}
	if len(hooks) == 0 {
		return nil, nil
	}
	var payload map[string]json.RawMessage
	if err := json.Unmarshal(env.Payload, &payload); err != nil || payload == nil {
		return nil, pipeline.Permanent(fmt.Errorf("webhook fan-out %s: payload is not a JSON object: %v", env.ID, err))
	}
	documented := s.documented(name)
	if unmatched(payload["contactId"]) && contactRequired(name) {
		return nil, nil
	}
	body, err := Body(env, name, payload, documented)
	if err != nil {
		return nil, pipeline.Permanent(err)
	}
	out := make([]schemas.Envelope, 0, len(hooks))
	for _, h := range hooks {
		d := schemas.WebhookDelivery{MessageID: env.ID, Event: name, TargetKind: h.Kind, TargetID: h.ID,
			URL: h.URL, Attempt: 1, FirstAt: env.OccurredAt.UTC(), Body: body}
		// Body is json.Marshal's output, appended as it is (one
		// encoding per message, not one per target).
		p, err := schemas.AppendWebhookDelivery(make([]byte, 0, 256+len(body)), &d)
		if err != nil {
			return nil, pipeline.Permanent(fmt.Errorf("webhook fan-out %s: %w", env.ID, err))
		}
		out = append(out, schemas.Envelope{
			ID:        schemas.ChildID(env.ID+"/"+h.ID, schemas.TypeWebhookDelivery, 1),
			Workspace: env.Workspace, Type: schemas.TypeWebhookDelivery,
			Key: DeliveryKey(env.Workspace, h.ID, env.ID), OccurredAt: env.OccurredAt, CausationID: env.ID,
			Traceparent: env.Traceparent, Payload: p,
			// json.Marshal's bytes (Body is json.Marshal's output):
			// compact and valid, copied without another check.
			PayloadCompact: true,
		})
	}
	return out, nil
}

// DeliveryKey is schemas.WebhookDeliveryKey: different messages to one
// target are different keys (handled concurrently, bounded per target by
// the delivery stage).
func DeliveryKey(ws, target, msg string) string { return schemas.WebhookDeliveryKey(ws, target, msg) }

// contactRequired reports whether the catalogue requires contactId in the
// event's data: such an event without a matched contact fires nothing.
func contactRequired(name string) bool {
	e, ok := schemas.LookupWebhookEvent(name)
	if !ok {
		return false
	}
	var schema struct {
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(e.Data, &schema)
	for _, r := range schema.Required {
		if r == "contactId" {
			return true
		}
	}
	return false
}

// unmatched reports a missing, null or empty contactId.
func unmatched(v json.RawMessage) bool {
	s := string(v)
	return s == "" || s == "null" || s == `""`
}

// documented returns the properties the catalogue documents for event
// name's data (nil when the event has no schema: every property is kept).
func (s *Stage) documented(name string) map[string]bool {
	if v, ok := s.fields.Load(name); ok {
		return v.(map[string]bool)
	}
	var m map[string]bool
	if e, ok := schemas.LookupWebhookEvent(name); ok {
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if json.Unmarshal(e.Data, &schema) == nil && len(schema.Properties) > 0 {
			m = make(map[string]bool, len(schema.Properties))
			for k := range schema.Properties {
				m[k] = true
			}
		}
	}
	s.fields.Store(name, m)
	return m
}

// body is the delivery body of spec 2.6.
type body struct {
	ID        string                     `json:"id"`
	Event     string                     `json:"event"`
	Timestamp string                     `json:"timestamp"`
	TeamID    string                     `json:"teamId"`
	Data      map[string]json.RawMessage `json:"data"`
}

// Body returns the spec 2.6 body of env as event name: id (the domain
// event's envelope id, stable across attempts and replays), event,
// timestamp (when it happened, RFC 3339 UTC with milliseconds), teamId
// (the workspace) and data (payload's members the catalogue documents;
// all of them when documented is nil).
func Body(env schemas.Envelope, name string, payload map[string]json.RawMessage, documented map[string]bool) (json.RawMessage, error) {
	data := make(map[string]json.RawMessage, len(payload))
	for k, v := range payload {
		if documented == nil || documented[k] {
			data[k] = v
		}
	}
	b, err := json.Marshal(body{ID: env.ID, Event: name, Timestamp: env.OccurredAt.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		TeamID: env.Workspace, Data: data})
	if err != nil {
		return nil, fmt.Errorf("webhook body of %s: %w", env.ID, err)
	}
	return b, nil
}

var (
	_ pipeline.Stage       = (*Stage)(nil)
	_ pipeline.KindIgnorer = (*Stage)(nil)
)
