package contacts

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"strconv"
	"strings"

	"sendstream/ingest"
	"sendstream/schemas"
)

// Limits of request fields. Text fields have no length of their own (the
// spec shows none); what a request writes into a contact is bounded by
// MaxContactValues (size.go).
const (
	defaultLimit   = 50   // spec 8.3
	maxLimit       = 100  // spec 8.3
	maxSearchEmail = 1000 // a longer email query is not an address anyway (the email rule allows 254 octets)
)

// codeValidation is the error code of 400 answers naming failing fields.
const codeValidation = "validation_error"

// api holds what the handlers need.
type api struct {
	store  *Store
	signer *Signer
	site   string
	log    *slog.Logger
}

// pagination is the spec 4.5 pagination object.
type pagination struct {
	Page       int64 `json:"page"`
	Limit      int   `json:"limit"`
	Total      int64 `json:"total"`
	TotalPages int64 `json:"totalPages"`
}

type pageResponse struct {
	Contacts   []Contact  `json:"contacts"`
	Pagination pagination `json:"pagination"`
}

type listsResponse struct {
	Lists []List `json:"lists"`
}

type subscribeResponse struct {
	Success   bool   `json:"success"`
	ContactID string `json:"contactId"`
	ListID    string `json:"listId"`
	Status    string `json:"status"`
	Created   bool   `json:"created"`
}

type unsubscribeResponse struct {
	Success   bool    `json:"success"`
	Removed   bool    `json:"removed"`
	ContactID *string `json:"contactId"`
	ListID    string  `json:"listId"`
}

// profile reads the changeable contact fields and the creation-only ones of
// a body, checking customFields against the workspace's definitions.
func (a *api) profile(c *ingest.Call, m map[string]json.RawMessage, errs *fieldErrs) (f Fields, source string, meta json.RawMessage, err error) {
	f.FirstName = optString(m, "firstName", errs)
	f.Country = optString(m, "country", errs)
	f.Language = optString(m, "language", errs)
	src := optString(m, "source", errs)
	if src != nil {
		source = *src
	}
	size := Values{FirstName: f.FirstName, Country: f.Country, Language: f.Language, Source: src}
	meta = optObject(m, "metadata", errs)
	if meta != nil && checkMetadata(meta, errs) {
		size.Metadata = meta
	}
	custom := optObject(m, "customFields", errs)
	if custom != nil {
		raw, ok := schemas.JSONMembers(custom)
		if !ok {
			errs.add("customFields", "must be an object")
			return f, source, meta, nil
		}
		patch, bad, err := a.store.CustomFieldPatch(c.Ctx, c.Principal.Workspace, raw)
		if err != nil {
			return f, source, meta, err
		}
		for _, k := range bad {
			typ, _ := a.store.FieldType(c.Ctx, c.Principal.Workspace, k)
			errs.add("customFields."+k, "must be a "+typeNoun(typ))
		}
		f.CustomFields = patch
		size.CustomFields = make(map[string]json.RawMessage, len(patch))
		for k := range patch { // unknown keys are ignored, so not counted
			size.CustomFields[k] = raw[k]
		}
	}
	if field, msg, ok := CheckSize(size); !ok {
		errs.add(field, msg)
	}
	return f, source, meta, nil
}

// upsert is POST /v1/contacts (spec 2.1, 4.5).
func (a *api) upsert(c *ingest.Call) ingest.Result {
	m, bad := object(c.Body)
	if bad != nil {
		return *bad
	}
	var errs fieldErrs
	e := email(m, "email", &errs)
	f, source, meta, err := a.profile(c, m, &errs)
	if err != nil {
		return a.internal(err)
	}
	if len(errs.fields) == 0 {
		field, msg, err := a.store.CheckGrowth(c.Ctx, c.Principal.Workspace, e, f)
		if err != nil {
			return a.internal(err)
		}
		if field != "" {
			errs.add(field, msg)
		}
	}
	if len(errs.fields) > 0 {
		return errs.result()
	}
	if source == "" {
		source = "api"
	}
	ws := c.Principal.Workspace
	r, err := a.store.Upsert(c.Ctx, ws, UpsertInput{Email: e, Fields: f, Source: source, Metadata: meta, RequestID: c.RequestID})
	if errors.Is(err, ErrContactLimit) {
		return limitReached()
	}
	if err != nil {
		return a.internal(err)
	}
	status := 200
	if r.Created {
		status = 201
	}
	pub := UpsertMessages(ws, c.RequestID, r)
	return ingest.Result{
		Status:    status,
		Raw:       encodeUpsert(r),
		Publish:   pub,
		Stored:    len(pub) > 0,
		Outboxed:  r.Outbox != 0, // created and updated are all an upsert announces
		Produced:  schemas.Produced{ContactIDs: []string{r.Contact.ID}},
		Published: a.published(r.Outbox),
	}
}

// page is GET /v1/contacts (spec 4.5). A parameter that is present must be
// valid, even empty: "?limit=" is refused, never read as the default.
func (a *api) page(c *ingest.Call) ingest.Result {
	var errs fieldErrs
	page := int64(1)
	if c.HasQuery("page") {
		n, ok := ingest.Digits(c.Query("page"))
		if !ok || n < 1 {
			errs.add("page", "must be a whole number from 1, in plain digits")
		} else {
			page = n
		}
	}
	limit := defaultLimit
	if c.HasQuery("limit") {
		n, ok := ingest.Digits(c.Query("limit"))
		if !ok || n < 1 || n > maxLimit {
			errs.add("limit", "must be a whole number from 1 to 100, in plain digits")
		} else {
			limit = int(n)
		}
	}
	if c.HasQuery("listId") && strings.TrimSpace(c.Query("listId")) == "" {
		errs.add("listId", "must be a list id when present")
	}
	if len(errs.fields) > 0 {
		return errs.result()
	}
	status := strings.ToUpper(strings.TrimSpace(c.Query("status")))
	if c.HasQuery("status") && !ValidStatus(status) {
		return ingest.Fail(400, "invalid_status", "Unknown status "+strconv.Quote(c.Query("status"))+
			"; use one of "+strings.Join(ContactStatuses, ", "), "status")
	}
	ws := c.Principal.Workspace
	q := PageQuery{Offset: pageOffset(page, limit), Limit: limit, Status: status}
	if c.HasQuery("listId") {
		id := c.Query("listId")
		if _, err := a.store.List(c.Ctx, ws, id); err != nil {
			return a.listErr(err, id)
		}
		q.ListID = id
	}
	p, err := a.store.Page(c.Ctx, ws, q)
	if err != nil {
		return a.internal(err)
	}
	return ingest.Result{Status: 200, Raw: encodePage(p, pagination{
		Page: page, Limit: limit, Total: p.Total, TotalPages: (p.Total + int64(limit) - 1) / int64(limit),
	})}
}

// pageOffset is the rows before page (from 1) of limit rows, saturated at
// math.MaxInt64: any page number is valid, and one past the end is empty.
func pageOffset(page int64, limit int) int64 {
	if page-1 > math.MaxInt64/int64(limit) {
		return math.MaxInt64
	}
	return (page - 1) * int64(limit)
}

// search is GET /v1/contacts/search?email= (spec 4.5): the contact with its
// lists, or a JSON null body.
func (a *api) search(c *ingest.Call) ingest.Result {
	q := c.Query("email")
	if strings.TrimSpace(q) == "" {
		return ingest.Fail(400, codeValidation, "Query parameter email is required", "email")
	}
	if len(q) > maxSearchEmail {
		return ingest.Fail(400, codeValidation, "email must be a valid email address", "email")
	}
	e, err := NormalizeEmail(q)
	if err != nil {
		return ingest.Fail(400, codeValidation, "email "+err.Error(), "email")
	}
	found, err := a.store.Search(c.Ctx, c.Principal.Workspace, e)
	if err != nil {
		return a.internal(err)
	}
	if found == nil {
		return ingest.Result{Status: 200, Raw: []byte("null")}
	}
	return ingest.Result{Status: 200, Body: found, Produced: schemas.Produced{ContactIDs: []string{found.ID}}}
}

// lists is GET /v1/lists (spec 4.5).
func (a *api) lists(c *ingest.Call) ingest.Result {
	ls, err := a.store.Lists(c.Ctx, c.Principal.Workspace)
	if err != nil {
		return a.internal(err)
	}
	return ingest.OK(200, listsResponse{Lists: ls})
}

// target reads the contact of a subscribe or unsubscribe body: email or
// contactId, exactly one. withProfile also reads the creation fields.
func (a *api) target(c *ingest.Call, withProfile bool) (Target, *ingest.Result) {
	m, bad := object(c.Body)
	if bad != nil {
		return Target{}, bad
	}
	var errs fieldErrs
	var t Target
	_, hasEmail := m["email"]
	hasEmail = hasEmail && !isNull(m["email"])
	// Any length: an id that names no contact is 404 contact_not_found
	// (subscribe) or nothing to remove (unsubscribe), never a 400.
	id := optString(m, "contactId", &errs)
	switch {
	case hasEmail && id != nil:
		errs.add("contactId", "must not be sent together with email")
	case id != nil:
		if *id == "" {
			errs.add("contactId", "must not be empty")
		}
		t.ID = *id
	default:
		t.Email = email(m, "email", &errs)
	}
	if withProfile && t.ID == "" {
		var err error
		t.Fields, t.Source, t.Metadata, err = a.profile(c, m, &errs)
		if err != nil {
			r := a.internal(err)
			return t, &r
		}
	}
	if len(errs.fields) > 0 {
		r := errs.result()
		return t, &r
	}
	return t, nil
}

// subscribe is POST /v1/lists/{id}/subscribe (spec 3.2).
func (a *api) subscribe(c *ingest.Call) ingest.Result {
	t, bad := a.target(c, true)
	if bad != nil {
		return *bad
	}
	ws := c.Principal.Workspace
	l, err := a.store.List(c.Ctx, ws, c.Params["id"])
	if err != nil {
		return a.listErr(err, c.Params["id"])
	}
	r, err := a.store.Subscribe(c.Ctx, l, t, func(r MembershipResult) []ingest.Message {
		ev := newEvents(ws, c.RequestID)
		if r.ContactCreated {
			ev.created(r.Contact)
		}
		if r.Changed {
			ev.membership(schemas.TypeContactAddedToList, r.Contact, l, r.Status, "api", c.RequestID, ev.now, true)
		}
		return ev.out
	})
	switch {
	case errors.Is(err, ErrContactLimit):
		return limitReached()
	case errors.Is(err, ErrContactNotFound):
		return ingest.Fail(404, "contact_not_found", "No contact "+strconv.Quote(t.ID)+" in this workspace", "contactId")
	case err != nil:
		return a.internal(err)
	}
	res := ingest.Result{
		Status:   200,
		Body:     subscribeResponse{Success: true, ContactID: r.Contact.ID, ListID: l.ID, Status: r.Status, Created: r.ContactCreated},
		Stored:   r.ContactCreated || r.Changed,
		Produced: schemas.Produced{ContactIDs: []string{r.Contact.ID}},
	}
	a.announced(&res, r.Announced)
	return res
}

// unsubscribe is POST /v1/lists/{id}/unsubscribe (spec 3.2).
func (a *api) unsubscribe(c *ingest.Call) ingest.Result {
	t, bad := a.target(c, false)
	if bad != nil {
		return *bad
	}
	ws := c.Principal.Workspace
	l, err := a.store.List(c.Ctx, ws, c.Params["id"])
	if err != nil {
		return a.listErr(err, c.Params["id"])
	}
	r, err := a.store.Unsubscribe(c.Ctx, l, t, func(r UnsubscribeResult) []ingest.Message {
		if !r.Removed {
			return nil
		}
		ev := newEvents(ws, c.RequestID)
		ev.membership(schemas.TypeContactRemovedFromList, Contact{ID: r.ContactID, Email: r.Email}, l,
			StatusUnsubscribed, "api", c.RequestID, ev.now, false)
		return ev.out
	})
	if err != nil {
		return a.internal(err)
	}
	body := unsubscribeResponse{Success: true, Removed: r.Removed, ListID: l.ID}
	res := ingest.Result{Status: 200, Body: &body}
	if r.ContactID != "" {
		body.ContactID = &r.ContactID
		res.Produced = schemas.Produced{ContactIDs: []string{r.ContactID}}
	}
	res.Stored = r.Removed
	a.announced(&res, r.Announced)
	return res
}

// published is the Result.Published of a call whose change wrote outbox
// rows ids (nil when it wrote none).
func (a *api) published(ids ...int64) func() {
	n := 0
	for _, id := range ids {
		if id != 0 {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return func() { a.store.Published(ids...) }
}

// announced makes res publish a write's events, which are in the outbox:
// a 503 after a failed publish says they will still be delivered, and the
// broker's ack deletes their rows.
func (a *api) announced(res *ingest.Result, an Announced) {
	res.Publish = an.Events
	res.Outboxed = len(an.Events) > 0
	res.Published = a.published(an.Outbox...)
}

func limitReached() ingest.Result {
	return ingest.Fail(403, "contact_limit_reached",
		"The plan's contact limit is reached: new contacts cannot be added (existing ones can still be updated)")
}

func (a *api) listErr(err error, id string) ingest.Result {
	if errors.Is(err, ErrListNotFound) {
		return ingest.Fail(404, "list_not_found", "No list "+strconv.Quote(id)+" in this workspace")
	}
	return a.internal(err)
}

// internal logs err and answers 500 without leaking the cause, or 503
// when the request ran out of time. A write that was already under way
// then may still commit (group-committed statements run on their own), so
// the answer does not say that nothing was done; repeating it is safe.
func (a *api) internal(err error) ingest.Result {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		a.log.Warn("contacts: request timed out", "err", err)
		return ingest.Fail(503, "unavailable", "The request did not complete in time; a change it made may still be "+
			"stored. Repeating it is safe (it may then answer as if the change had already been made)")
	}
	a.log.Error("contacts: internal error", "err", err)
	return ingest.Fail(500, "internal_error", "Internal error")
}
