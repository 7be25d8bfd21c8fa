// Package events records events and goals (spec 2.3, 4.6, 4.7): the
// handlers of POST /api/v1/events, /api/v1/events/import and
// /api/public/events, the validation of an event, and the Store that
// resolves contacts and externalId claims in Postgres with group commit.
//
// The synchronous part of recording an event is only what the answer
// depends on: validation, the contact match (for contactId) and the
// externalId claim (for 201 versus 200 duplicate), in at most one Postgres
// round trip shared with concurrent requests. The event is then published
// to the events topic as an event.recorded.v1 envelope with acks=all before
// the answer; everything else (ClickHouse analytics, goals, activity,
// webhooks, journeys) is done by stages.
package events

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"sendstream/ingest"
	"sendstream/ingest/auth"
	"sendstream/schemas"
)

// Rate limits of spec 4.1 / 8.1, per workspace per minute.
const (
	LimitSingle = 300
	LimitImport = 60
	LimitPublic = 100
)

// Deps are what the handlers need.
type Deps struct {
	// Store resolves contacts and claims; required.
	Store *Store
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Routes returns the event endpoints for the ingest server.
func Routes(d Deps) []ingest.Route {
	if d.Store == nil {
		panic("events: Deps.Store is required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	h := &handlers{store: d.Store, now: d.Now}
	return []ingest.Route{
		{Method: "POST", Path: "/api/v1/events", Credential: ingest.CredKey, Scope: auth.ScopeEventsWrite,
			ScopeInError: true, Limit: LimitSingle, Logged: true, Handle: h.record},
		{Method: "POST", Path: "/api/v1/events/import", Credential: ingest.CredKey, Scope: auth.ScopeEventsWrite,
			ScopeInError: true, Limit: LimitImport, Logged: true, Handle: h.importEvents},
		{Method: "POST", Path: "/api/public/events", Credential: ingest.CredKeyOrTracking, Scope: auth.ScopeEventsWrite,
			Limit: LimitPublic, Logged: true, CORS: true, Handle: h.public},
	}
}

type handlers struct {
	store *Store
	now   func() time.Time
}

// accepted is one event ready to answer and publish.
type accepted struct {
	id        string
	contactID string
	dup       bool
	publish   bool
	env       schemas.Envelope
}

// lookupOf is the Lookup of one validated event.
func lookupOf(ws string, in *Input) Lookup {
	l := Lookup{Workspace: ws, Email: in.Email, ContactID: in.ContactID}
	if in.ExternalID != "" {
		l.EventID = schemas.IDFromKey(ws, schemas.EventIDScope, in.ExternalID)
	}
	return l
}

// accept turns a validated, resolved event into its envelope and answer.
// Duplicates are republished while their claim is fresh (see
// Resolution.Fresh). bodyCompact is ingest.Call.BodyCompact: the payload's
// one copied member, properties, is compact when the body is, and the
// envelope then says so, so the producer copies the payload unchecked.
func accept(ws string, in *Input, l *Lookup, r *Resolution, source string, now time.Time, bodyCompact bool) accepted {
	a := accepted{contactID: r.ContactID, dup: r.Duplicate}
	switch {
	case r.EventID != "":
		a.id = r.EventID
	case l.EventID != "":
		a.id = l.EventID
	default:
		a.id = schemas.NewID()
	}
	a.publish = !r.Duplicate || r.Fresh
	if !a.publish {
		return a
	}
	occurred := in.OccurredAt
	if occurred.IsZero() {
		occurred = now
	}
	key := ws + ":" + a.id
	if a.contactID != "" {
		key = ws + ":" + a.contactID
	}
	body := appendPayload(make([]byte, 0, 256+len(in.Properties)), payload{
		in: in, contactID: a.contactID, occurredAt: occurred, receivedAt: now, source: source,
	})
	a.env = schemas.Envelope{
		ID: a.id, Workspace: ws, Type: schemas.TypeEventRecorded, Key: key,
		OccurredAt: occurred, Payload: body, PayloadCompact: bodyCompact,
	}
	return a
}

// record is POST /api/v1/events.
func (h *handlers) record(c *ingest.Call) ingest.Result {
	in, errs := Parse(c.Body, true)
	if len(errs) > 0 {
		return invalid(errorMessage("Invalid input", errs), errorCode(errs), fieldsOf("", errs))
	}
	return h.one(c, &in, schemas.EventSourceAPI, false)
}

// public is POST /api/public/events (spec 4.7).
func (h *handlers) public(c *ingest.Call) ingest.Result {
	if origin := c.Header("Origin"); !OriginAllowed(origin, c.Principal.Domains) {
		return ingest.Fail(403, "origin_not_allowed", "The tracking token does not allow the origin "+origin)
	}
	in, errs := Parse(c.Body, false)
	if len(errs) > 0 {
		return invalid(errorMessage("Invalid input", errs), errorCode(errs), fieldsOf("", errs))
	}
	return h.one(c, &in, schemas.EventSourcePublic, true)
}

// one records a single validated event and answers.
func (h *handlers) one(c *ingest.Call, in *Input, source string, public bool) ingest.Result {
	ws := c.Principal.Workspace
	l := [1]Lookup{lookupOf(ws, in)}
	var r [1]Resolution
	if err := h.store.Resolve(c.Ctx, l[:], r[:]); err != nil {
		return unavailable()
	}
	a := accept(ws, in, &l[0], &r[0], source, h.now().UTC(), c.BodyCompact)
	res := ingest.Result{Status: 201}
	if a.dup {
		res.Status = 200
	}
	if public {
		res.Raw = appendPublicOutcome(make([]byte, 0, 64), a.id, a.dup)
	} else {
		res.Raw = appendOutcome(make([]byte, 0, 128), a.id, a.contactID, a.dup)
	}
	if a.publish {
		res.Publish = []ingest.Message{{Topic: schemas.TopicEvents, Env: a.env}}
	}
	res.Produced.ExternalID = in.ExternalID
	if !a.dup {
		res.Produced.EventIDs = []string{a.id}
		if a.contactID != "" {
			res.Produced.ContactIDs = []string{a.contactID}
		}
	}
	return res
}

// OriginAllowed reports whether a browser Origin may use a tracking token
// limited to domains (spec 4.7): no Origin header, or a token without
// domains, always may; otherwise the origin's host must be one of the
// domains or a subdomain of one. An Origin of "null" or without a host
// never matches.
func OriginAllowed(origin string, domains []string) bool {
	if origin == "" || len(domains) == 0 {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if host == "" {
		return false
	}
	for _, d := range domains {
		d = strings.ToLower(strings.TrimSuffix(d, "."))
		if host == d || strings.HasSuffix(host, "."+d) {
			return true
		}
	}
	return false
}

// fieldsOf returns the distinct field paths of errs, prefixed.
func fieldsOf(prefix string, errs []FieldError) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		f := prefix
		if e.Field != "" {
			if f != "" {
				f += "."
			}
			f += e.Field
		}
		if f == "" {
			continue
		}
		dup := false
		for _, o := range out {
			if o == f {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, f)
		}
	}
	return out
}

func invalid(msg, code string, fields []string) ingest.Result {
	return ingest.Result{Status: 400, Body: ingest.ErrorBody{Error: msg, Code: code, Fields: fields}}
}

func unavailable() ingest.Result {
	return ingest.Fail(503, "unavailable", "The service is temporarily unavailable; nothing was recorded, retry later")
}

func itoa(i int) string { return strconv.Itoa(i) }
