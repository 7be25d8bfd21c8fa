package transactional

import (
	"errors"
	"log/slog"
	"sort"
	"strings"
	"time"

	"sendstream/ingest"
	"sendstream/schemas"
)

// api holds what the handlers need.
type api struct {
	svc     *service
	sources *schemas.SourceCache // inline HTML of sends, kept encoded for the envelope
	store   *Store
	site    string
	secret  string
	sns     *SNSVerifier
	log     *slog.Logger
}

func (a *api) internal(err error) ingest.Result {
	a.log.Error("transactional request failed", "err", err)
	return ingest.Fail(500, "internal_error", "Internal error")
}

func refusalResult(r *refusal) ingest.Result {
	return ingest.Result{Status: r.Status, Body: ingest.ErrorBody{Error: r.Error, Code: r.Code, Missing: r.Missing, Fields: r.Fields}}
}

// send is POST /v1/transactional/send (spec 4.2).
func (a *api) send(c *ingest.Call) ingest.Result {
	ws := c.Principal.Workspace
	req, errs := parseSend(c.Body, a.sources, ws)
	if !errs.empty() {
		return ingest.Fail(400, codeValidation, errs.message(), errs.fields...)
	}
	req.DataCompact = c.BodyCompact && req.DataRaw != nil
	out, err := a.svc.send(c.Ctx, ws, c.Principal.WorkspaceName, c.RequestID, req, c.Body)
	if err != nil {
		return a.internal(err)
	}
	if out.refused != nil {
		return refusalResult(out.refused)
	}
	res := ingest.Result{Status: out.status, Raw: out.answer.appendJSON(make([]byte, 0, 256)), RawJSON: true, Produced: schemas.Produced{
		MessageIDs: []string{out.answer.ID}, Recipient: req.To, ExternalID: req.ExternalID,
	}}
	if out.answer.ContactID != nil {
		res.Produced.ContactIDs = []string{*out.answer.ContactID}
	}
	// A new message (201) or a contact change is stored before publishing.
	res.Stored = out.status == 201 || len(out.contact) > 0
	res.Publish = append(res.Publish, out.contact...)
	if id := out.outbox; id != 0 && a.svc.contacts != nil {
		res.Published = func() { a.svc.contacts.Published(id) }
	}
	for _, env := range out.publish {
		res.Publish = append(res.Publish, ingest.Message{Topic: schemas.TopicTransactional, Env: env})
	}
	return res
}

// validate is POST /v1/transactional/validate (spec 4.3).
func (a *api) validate(c *ingest.Call) ingest.Result {
	req, errs := parseSend(c.Body, nil, "")
	if !errs.empty() {
		return ingest.Fail(400, codeValidation, errs.message(), errs.fields...)
	}
	out, err := a.svc.validate(c.Ctx, c.Principal.Workspace, c.Principal.WorkspaceName, req)
	if err != nil {
		return a.internal(err)
	}
	return ingest.Result{Status: 200, Body: out, Produced: schemas.Produced{Recipient: req.To, ExternalID: req.ExternalID}}
}

// statusEvent is one status change of a message.
type statusEvent struct {
	Status string    `json:"status"`
	At     time.Time `json:"at"`
	Detail string    `json:"detail,omitempty"`
}

// bounceView describes a bounce.
type bounceView struct {
	Type   string `json:"type"`
	Reason string `json:"reason"`
}

// messageView is a message in the list and the status lookup (fields not
// shown in the spec; Postmark- and Resend-like).
type messageView struct {
	ID            string        `json:"id"`
	Status        string        `json:"status"`
	To            string        `json:"to"`
	MessageID     string        `json:"messageId"`
	ExternalID    *string       `json:"externalId"`
	ContactID     *string       `json:"contactId"`
	TemplateID    *string       `json:"templateId"`
	Subject       *string       `json:"subject"`
	CreatedAt     time.Time     `json:"createdAt"`
	SentAt        *time.Time    `json:"sentAt"`
	DeliveredAt   *time.Time    `json:"deliveredAt"`
	FailureReason *string       `json:"failureReason"`
	Bounce        *bounceView   `json:"bounce,omitempty"`
	Events        []statusEvent `json:"events,omitempty"`
}

func view(m Message, withEvents bool) messageView {
	v := messageView{
		ID: m.ID, Status: m.Status, To: m.To, MessageID: m.RFCMessageID, ExternalID: strPtr(m.ExternalID),
		ContactID: strPtr(m.ContactID), TemplateID: strPtr(m.TemplateID), Subject: m.Subject, CreatedAt: m.CreatedAt.UTC(),
		SentAt: utc(m.SentAt), DeliveredAt: utc(m.DeliveredAt), FailureReason: strPtr(m.FailureReason),
	}
	if m.BouncedAt != nil {
		v.Bounce = &bounceView{Type: m.BounceType, Reason: m.BounceReason}
	}
	if withEvents {
		ev := []statusEvent{{Status: schemas.MessageQueued, At: m.CreatedAt.UTC()}}
		add := func(status string, at *time.Time, detail string) {
			if at != nil {
				ev = append(ev, statusEvent{Status: status, At: at.UTC(), Detail: detail})
			}
		}
		add(schemas.MessageSent, m.SentAt, "")
		add(schemas.MessageDelivered, m.DeliveredAt, "")
		bounce := m.BounceType
		if m.BounceReason != "" {
			bounce += ": " + m.BounceReason
		}
		add(schemas.MessageBounced, m.BouncedAt, bounce)
		add(schemas.MessageComplained, m.ComplainedAt, m.ComplaintType)
		add(schemas.MessageFailed, m.FailedAt, m.FailureReason)
		sort.SliceStable(ev, func(i, j int) bool { return ev[i].At.Before(ev[j].At) })
		v.Events = ev
	}
	return v
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// status is GET /v1/transactional/{messageId}/status (spec 4.4).
func (a *api) status(c *ingest.Call) ingest.Result {
	ref := c.Params["messageId"]
	id, ext := ref, ""
	if strings.HasPrefix(ref, "ext:") {
		id, ext = "", strings.TrimPrefix(ref, "ext:")
	}
	if id == "" && ext == "" {
		return ingest.Fail(404, CodeMessageNotFound, "Message not found")
	}
	m, err := a.store.Get(c.Ctx, c.Principal.Workspace, id, ext)
	if errors.Is(err, ErrMessageNotFound) {
		return ingest.Fail(404, CodeMessageNotFound, "Message "+ref+" not found in this workspace")
	}
	if err != nil {
		return a.internal(err)
	}
	return ingest.OK(200, view(m, true))
}

// listAnswer is the body of GET /v1/transactional.
type listAnswer struct {
	Messages   []messageView `json:"messages"`
	NextBefore *string       `json:"nextBefore"`
}

// list is GET /v1/transactional (spec 4.4). A parameter that is present
// must be valid, even empty: "?limit=" or "?before=" is refused, never read
// as the default.
func (a *api) list(c *ingest.Call) ingest.Result {
	var errs fieldErrs
	q := ListQuery{Limit: 50, Before: c.Query("before"), ExternalID: c.Query("externalId")}
	if c.HasQuery("limit") {
		n, ok := ingest.Digits(c.Query("limit"))
		if !ok || n < 1 || n > 100 {
			errs.add("limit", "must be a whole number from 1 to 100, in plain digits")
		} else {
			q.Limit = int(n)
		}
	}
	if c.HasQuery("status") {
		v := c.Query("status")
		if !contains(schemas.MessageStatuses, v) {
			errs.add("status", "must be one of "+strings.Join(schemas.MessageStatuses, ", "))
		}
		q.Status = v
	}
	if c.HasQuery("to") {
		// The stored form of the address (the email rule), so any spelling
		// of it finds the messages; what cannot be an address is refused.
		to, err := schemas.NormalizeEmail(c.Query("to"))
		if err != nil {
			errs.add("to", "must be a recipient address when present: "+err.Error())
		}
		q.To = to
	}
	if c.HasQuery("externalId") && q.ExternalID == "" {
		errs.add("externalId", "must not be empty when present")
	}
	if !errs.empty() {
		return ingest.Fail(400, codeValidation, errs.message(), errs.fields...)
	}
	if c.HasQuery("before") && q.Before == "" {
		return ingest.Fail(400, CodeInvalidCursor, "Invalid input: before must be the nextBefore of an earlier page, not empty", "before")
	}
	msgs, err := a.store.List(c.Ctx, c.Principal.Workspace, q)
	if errors.Is(err, ErrBadCursor) {
		return ingest.Fail(400, CodeInvalidCursor, "Invalid input: before must be the nextBefore of an earlier page", "before")
	}
	if err != nil {
		return a.internal(err)
	}
	out := listAnswer{Messages: make([]messageView, 0, len(msgs))}
	for _, m := range msgs {
		out.Messages = append(out.Messages, view(m, false))
	}
	if len(msgs) == q.Limit {
		last := msgs[len(msgs)-1].ID
		out.NextBefore = &last
	}
	return ingest.OK(200, out)
}
