// Package webhooks is the REST hooks API of spec 2.5, 4.9 and 6 (issue 25):
// the routes POST /api/v1/webhooks/subscribe, DELETE /api/v1/webhooks/{id}
// and GET /api/v1/webhooks/events, with the subscriptions kept in Postgres
// (Store). The target rules, the connect-time SSRF guard and Standard
// Webhooks signing are in package sinks/webhook, which the delivery stages
// share.
//
// The event types are the catalogue in package schemas
// (schemas.WebhookEvents).
package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"sendstream/ingest"
	"sendstream/ingest/auth"
	"sendstream/schemas"
	"sendstream/sinks/webhook"
)

// Limit is the rate limit of every webhooks endpoint (spec 4.1, 8.1), per
// workspace per minute, each endpoint with its own counter.
const Limit = 60

// Error codes of the webhooks endpoints, beside the target codes.
const (
	CodeValidation   = "validation_error"
	CodeUnknownEvent = "unknown_event"
	CodeNotFound     = "not_found"
)

// resolveTimeout bounds the subscribe-time DNS lookup of a target.
const resolveTimeout = 5 * time.Second

// Deps are what the handlers need.
type Deps struct {
	// Store keeps subscriptions; required.
	Store *Store
	// Guard applies the address rules to targets; required (the same
	// guard, with the same allowed ranges, as the delivery stage's).
	Guard *webhook.Guard
}

// Routes returns the REST hooks endpoints for the ingest server.
func Routes(d Deps) []ingest.Route {
	if d.Store == nil || d.Guard == nil {
		panic("webhooks: Deps.Store and Deps.Guard are required")
	}
	h := &handlers{store: d.Store, guard: d.Guard, catalogue: catalogueBody()}
	route := func(method, path string, handle func(*ingest.Call) ingest.Result) ingest.Route {
		return ingest.Route{Method: method, Path: path, Credential: ingest.CredKey, Scope: auth.ScopeWebhooksManage,
			ScopeInError: true, Limit: Limit, Logged: true, Handle: handle}
	}
	return []ingest.Route{
		route("POST", "/api/v1/webhooks/subscribe", h.subscribe),
		route("DELETE", "/api/v1/webhooks/{id}", h.delete),
		route("GET", "/api/v1/webhooks/events", h.events),
	}
}

type handlers struct {
	store     *Store
	guard     *webhook.Guard
	catalogue []byte
}

// eventInfo is one item of GET /v1/webhooks/events.
type eventInfo struct {
	Event       string          `json:"event"`
	Description string          `json:"description"`
	DataSchema  json.RawMessage `json:"dataSchema"`
}

// catalogueBody encodes the answer of GET /v1/webhooks/events once: the
// catalogue is complete when routes are built (registrations run in init).
func catalogueBody() []byte {
	evs := schemas.WebhookEvents()
	items := make([]eventInfo, len(evs))
	for i, e := range evs {
		items[i] = eventInfo{Event: e.Name, Description: e.Description, DataSchema: e.Data}
	}
	b, err := json.Marshal(struct {
		Events []eventInfo `json:"events"`
	}{items})
	if err != nil {
		panic("webhooks: encode the event catalogue: " + err.Error())
	}
	return b
}

// events is GET /api/v1/webhooks/events.
func (h *handlers) events(*ingest.Call) ingest.Result {
	return ingest.Result{Status: 200, Raw: h.catalogue, RawJSON: true}
}

// subscribeInput is the body of POST /v1/webhooks/subscribe.
type subscribeInput struct {
	Event     string
	TargetURL string
}

// fieldError is one refused field of a subscribe body.
type fieldError struct {
	field, code, msg string
}

// parseSubscribe validates the body's fields without the network.
func parseSubscribe(body []byte) (subscribeInput, webhook.Target, []fieldError) {
	var in subscribeInput
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		return in, webhook.Target{}, []fieldError{{"", CodeValidation, "the body must be a JSON object with event and targetUrl"}}
	}
	var errs []fieldError
	str := func(name string) (string, bool) {
		raw, ok := obj[name]
		var s string
		if !ok || string(raw) == "null" {
			errs = append(errs, fieldError{name, CodeValidation, name + " is required"})
			return "", false
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			errs = append(errs, fieldError{name, CodeValidation, name + " must be a string"})
			return "", false
		}
		return s, true
	}
	if ev, ok := str("event"); ok {
		in.Event = ev
		if _, known := schemas.LookupWebhookEvent(ev); !known {
			errs = append(errs, fieldError{"event", CodeUnknownEvent,
				"Unknown event type " + quote(ev) + "; GET /v1/webhooks/events lists the subscribable ones"})
		}
	}
	var t webhook.Target
	if u, ok := str("targetUrl"); ok {
		var err error
		if t, err = webhook.ParseTarget(u, false); err != nil {
			var te *webhook.TargetError
			errors.As(err, &te)
			errs = append(errs, fieldError{"targetUrl", te.Code, te.Reason})
		}
		in.TargetURL = t.URL
	}
	return in, t, errs
}

// subscribe is POST /api/v1/webhooks/subscribe: 201 with the new
// subscription, or 200 with the existing one for the same event and URL.
func (h *handlers) subscribe(c *ingest.Call) ingest.Result {
	in, target, errs := parseSubscribe(c.Body)
	if len(errs) == 0 {
		ctx, cancel := context.WithTimeout(c.Ctx, resolveTimeout)
		err := h.guard.CheckTarget(ctx, target)
		cancel()
		var te *webhook.TargetError
		switch {
		case errors.As(err, &te):
			errs = append(errs, fieldError{"targetUrl", te.Code, te.Reason})
		case err != nil:
			return ingest.Fail(503, "unavailable", "The target's host could not be resolved right now; nothing was stored, retry later")
		}
	}
	if len(errs) > 0 {
		return invalid(errs)
	}
	sub, created, err := h.store.Subscribe(c.Ctx, c.Principal.Workspace, in.Event, in.TargetURL)
	switch {
	case err != nil:
		return ingest.Fail(503, "unavailable", "The service is temporarily unavailable; nothing was stored, retry later")
	}
	status := 200
	if created {
		status = 201
	}
	return ingest.OK(status, sub)
}

// delete is DELETE /api/v1/webhooks/{id}.
func (h *handlers) delete(c *ingest.Call) ingest.Result {
	sub, err := h.store.Delete(c.Ctx, c.Principal.Workspace, c.Params["id"])
	switch {
	case errors.Is(err, ErrNotFound):
		return ingest.Fail(404, CodeNotFound, "Webhook subscription not found")
	case err != nil:
		return ingest.Fail(503, "unavailable", "The service is temporarily unavailable; nothing was deleted, retry later")
	}
	return ingest.OK(200, struct {
		Subscription
		Deleted bool `json:"deleted"`
	}{sub, true})
}

// invalid answers 400 with every refused field: the code of the failures
// when they share one, else validation_error.
func invalid(errs []fieldError) ingest.Result {
	code, msg := errs[0].code, errs[0].msg
	var fields []string
	for _, e := range errs {
		if e.code != code {
			code = CodeValidation
		}
		if e.field != "" {
			fields = append(fields, e.field)
		}
	}
	if len(errs) > 1 {
		msg = "Invalid input: " + msg
		for _, e := range errs[1:] {
			msg += "; " + e.msg
		}
	}
	return ingest.Result{Status: 400, Body: ingest.ErrorBody{Error: msg, Code: code, Fields: fields}}
}

// quote returns s as a JSON string, capped for a message.
func quote(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	b, _ := json.Marshal(s)
	return string(b)
}
