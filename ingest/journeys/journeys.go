// Package journeys is the synchronous edge of journeys (issue 26, spec
// 3.3, 4.8, 7.2): POST /api/public/journeys/trigger, which starts a
// contact on an active API Event journey, and the `admin journey …`
// commands that create and change journeys from JSON files (DESIGN.md).
// Journeys and executions live in Postgres through package sinks/journeys;
// the definition grammar is schemas.ParseJourney.
//
// A trigger creates the execution and writes its announcement
// (journey_execution.started.v1 on the journeys topic) into the contacts
// outbox in one transaction (contacts.Store.InOutbox) shared with the
// starts of concurrent calls (starts.go), publishes it before
// answering, and deletes the outbox row after the broker's ack; a crash or
// a failed publish leaves the row to the contacts relay. The engine
// (stages/journeys) runs the steps; a start whose journey begins with a
// wait is stored already in it, with its timer (first_wait.go).
package journeys

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"sendstream/ingest"
	"sendstream/ingest/contacts"
	"sendstream/schemas"
	"sendstream/sinks/journeys"
	"sendstream/sinks/ttlcache"
)

// LimitTrigger is the trigger endpoint's rate limit per workspace per
// minute (spec 4.1, 8.1).
const LimitTrigger = 120

// HeaderTriggerKey carries the journey's trigger key (spec 5.2).
const HeaderTriggerKey = "X-Trigger-Key"

// Error codes of the trigger endpoint beside the server's.
const (
	CodeValidation        = "validation_error"
	CodeWorkspaceMismatch = "workspace_mismatch"
	CodeContactNotFound   = "contact_not_found"
	CodeReentry           = "reentry_forbidden"
	CodeJourneyNotActive  = "journey_not_active"
	CodeNotAPIEvent       = "not_api_event_journey"
	CodeContactNotActive  = "contact_not_active"
)

// Outbox writes a change and its announcements in one transaction and is
// told when they were published: contacts.Store is the one outbox.
type Outbox interface {
	InOutbox(ctx context.Context, write func(pgx.Tx) error, announce func() []ingest.Message) ([]ingest.Message, []int64, error)
	Published(ids ...int64)
}

var _ Outbox = (*contacts.Store)(nil)

// Deps are what the trigger endpoint needs.
type Deps struct {
	// Store keeps journeys and executions; required.
	Store *journeys.Store
	// Outbox is the contacts store whose outbox and relay carry the
	// started announcements; required.
	Outbox Outbox
	// WakeScope, when not "", lets a start whose journey begins with a
	// wait (first_wait.go) insert the execution already in it, as its own
	// timer fired by the wake relay of the engine processes of this scope
	// (sinks/timers QueueFor of the topic prefix; sinks/journeys
	// RelayWakes); "" leaves every wait to the engine.
	WakeScope string
}

// Routes returns the trigger endpoint for the ingest server. Body cap (64
// KB), API key authentication (any scopes), suspension (403) and the rate
// limit (429) are the server's; the handler checks the trigger key.
func Routes(d Deps) []ingest.Route {
	if d.Store == nil || d.Outbox == nil {
		panic("journeys: Deps.Store and Deps.Outbox are required")
	}
	h := &handlers{store: d.Store, outbox: d.Outbox, starts: newStarter(d.Store, d.Outbox),
		byKey: ttlcache.NewCache[journeys.Journey](TriggerKeyTTL)}
	if d.WakeScope != "" {
		h.waits = &firstWaits{store: d.Store, scope: d.WakeScope, known: map[versionKey]*journeys.FirstWait{}}
	}
	return []ingest.Route{
		{Method: "POST", Path: "/api/public/journeys/trigger", Credential: ingest.CredKey, Limit: LimitTrigger,
			Logged: true, Handle: h.trigger},
	}
}

type handlers struct {
	store  *journeys.Store
	outbox Outbox
	starts *starter                          // shared start transactions (starts.go)
	byKey  *ttlcache.Cache[journeys.Journey] // trigger key's hash → its journey
	waits  *firstWaits                       // nil without Deps.WakeScope
}

// TriggerKeyTTL is how long the trigger endpoint reuses what it read of a
// trigger key (its journey's id and workspace, which never change): one
// Postgres read per key and second per process instead of one per call.
// Nothing a cached entry holds decides an answer on its own: the start's
// transaction reads the journey's status, trigger type and current version
// again (share-locked), so pausing, archiving, a change of trigger or a
// new version take effect on the next call. An unknown key is never cached.
const TriggerKeyTTL = time.Second

// triggerInput is the body of a trigger call (spec 4.8).
type triggerInput struct {
	Email string
	Data  json.RawMessage // a JSON object, or nil
}

// parseTrigger validates the body: email required (a valid address), data
// an object when present; other members are ignored.
func parseTrigger(body []byte) (triggerInput, []string, string) {
	var in triggerInput
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		return in, nil, "The body must be a JSON object with email and optional data"
	}
	var fields, msgs []string
	raw, ok := obj["email"]
	var s string
	switch {
	case !ok || string(raw) == "null":
		fields, msgs = append(fields, "email"), append(msgs, "email is required")
	case json.Unmarshal(raw, &s) != nil:
		fields, msgs = append(fields, "email"), append(msgs, "email must be a string")
	default:
		e, err := schemas.NormalizeEmail(s)
		if err != nil {
			fields, msgs = append(fields, "email"), append(msgs, "email must be a valid email address")
		}
		in.Email = e
	}
	if raw, ok := obj["data"]; ok && string(raw) != "null" {
		// raw is one valid JSON value (the body parsed): an object
		// exactly when it starts with '{'.
		if raw[0] != '{' {
			fields, msgs = append(fields, "data"), append(msgs, "data must be an object")
		} else {
			in.Data = raw
		}
	}
	if len(msgs) > 0 {
		return in, fields, "Invalid input: " + strings.Join(msgs, "; ")
	}
	return in, nil, ""
}

// triggered is the answer of a successful trigger.
type triggered struct {
	Success     bool   `json:"success"`
	ExecutionID string `json:"executionId"`
	JourneyID   string `json:"journeyId"`
	ContactID   string `json:"contactId"`
}

// trigger is POST /api/public/journeys/trigger.
func (h *handlers) trigger(c *ingest.Call) ingest.Result {
	key := strings.TrimSpace(c.Header(HeaderTriggerKey))
	if key == "" {
		return unauthorized("Missing trigger key: send the header X-Trigger-Key: <TRIGGER_KEY> from the journey's API Event trigger")
	}
	j, err := h.byKey.Get(c.Ctx, string(journeys.HashTriggerKey(key)), func(ctx context.Context) (journeys.Journey, error) {
		return h.store.ByTriggerKey(ctx, key)
	})
	switch {
	case errors.Is(err, journeys.ErrNotFound):
		return unauthorized("Invalid trigger key")
	case err != nil:
		return unavailable()
	case j.Workspace != c.Principal.Workspace:
		return ingest.Fail(403, CodeWorkspaceMismatch, "The API key and the trigger key belong to different workspaces")
	}
	in, fields, msg := parseTrigger(c.Body)
	if msg != "" {
		return ingest.Fail(400, CodeValidation, msg, fields...)
	}
	var wait *journeys.FirstWait
	if h.waits != nil && j.Version > 0 {
		wait = h.waits.get(c.Ctx, j.ID, j.Version)
	}
	d := h.starts.start(c.Ctx, startCall{requestID: c.RequestID, in: journeys.StartInput{
		Workspace: j.Workspace, JourneyID: j.ID, Trigger: schemas.TriggerAPIEvent, Email: in.Email,
		ExecutionID: schemas.NewID(), Data: in.Data, Wait: wait,
	}})
	if d.err != nil {
		return refused(d.err)
	}
	exec := d.exec
	res := ingest.OK(200, triggered{Success: true, ExecutionID: exec.ID, JourneyID: j.ID, ContactID: exec.ContactID})
	res.Publish, res.Stored, res.Outboxed = []ingest.Message{d.msg}, true, true
	res.Published = func() { h.outbox.Published(d.outboxID) }
	res.Produced = schemas.Produced{JourneyRunIDs: []string{exec.ID}, ContactIDs: []string{exec.ContactID}, Recipient: exec.Email}
	return res
}

// refused maps a refused start to its answer (spec 7.2).
func refused(err error) ingest.Result {
	switch {
	case errors.Is(err, journeys.ErrContactNotFound):
		return ingest.Fail(404, CodeContactNotFound, "No contact with that email in this workspace; the trigger never creates contacts")
	case errors.Is(err, journeys.ErrReentry):
		return ingest.Fail(409, CodeReentry, "The journey's reentry setting does not let this contact start it again")
	case errors.Is(err, journeys.ErrNotActive):
		return ingest.Fail(422, CodeJourneyNotActive, "The journey is not active")
	case errors.Is(err, journeys.ErrWrongTrigger):
		return ingest.Fail(422, CodeNotAPIEvent, "The journey does not start with an API Event trigger")
	case errors.Is(err, journeys.ErrContactNotActive):
		return ingest.Fail(422, CodeContactNotActive, "The contact is not ACTIVE; only active contacts start journeys")
	case errors.Is(err, journeys.ErrNotFound):
		return unauthorized("Invalid trigger key")
	}
	return unavailable()
}

func unauthorized(msg string) ingest.Result {
	r := ingest.Fail(401, "unauthorized", msg)
	r.Unauthenticated = true
	return r
}

func unavailable() ingest.Result {
	return ingest.Fail(503, "unavailable", "The service is temporarily unavailable; no journey was started, retry later")
}
