package transactional

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"sendstream/ingest"
	"sendstream/ingest/contacts"
	"sendstream/schemas"
	"sendstream/sinks/email"
)

// Codes of transactional refusals (spec 7.2; the ones the spec does not
// name are Sendstream's).
const (
	CodeTemplateError     = "TEMPLATE_ERROR"
	CodeMissingVariables  = "MISSING_VARIABLES"
	CodeSuppressed        = "RECIPIENT_SUPPRESSED"
	CodeMarketingContact  = "MARKETING_NEEDS_CONTACT"
	CodePolicyNotFound    = "SEND_POLICY_NOT_FOUND"
	CodeSenderNotAllowed  = "SENDER_DOMAIN_NOT_ALLOWED"
	CodeTemplateNotFound  = "template_not_found"
	CodeMessageNotFound   = "not_found"
	CodeInvalidCursor     = "invalid_cursor"
	CodeInvalidParameters = codeValidation
)

// spillThreshold is the encoded payload size above which the payload is
// stored in Postgres and the envelope carries a reference (the broker takes
// messages of at most about 1 MB).
const spillThreshold = 900 << 10

// errInternal wraps failures of the stores (answered 500).
type errInternal struct{ err error }

func (e errInternal) Error() string { return e.err.Error() }
func (e errInternal) Unwrap() error { return e.err }

// sendAnswer is the body of a send and of a deduplicated repeat (spec 2.4).
type sendAnswer struct {
	ID           string   `json:"id"`
	Status       string   `json:"status"`
	To           string   `json:"to"`
	MessageID    string   `json:"messageId"`
	ExternalID   *string  `json:"externalId,omitempty"`
	ContactID    *string  `json:"contactId,omitempty"`
	Deduplicated bool     `json:"deduplicated"`
	Warnings     []string `json:"warnings"`
}

// appendJSON appends the answer as encoding/json encodes it.
func (a *sendAnswer) appendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = schemas.AppendJSONString(b, a.ID)
	b = append(b, `,"status":`...)
	b = schemas.AppendJSONString(b, a.Status)
	b = append(b, `,"to":`...)
	b = schemas.AppendJSONString(b, a.To)
	b = append(b, `,"messageId":`...)
	b = schemas.AppendJSONString(b, a.MessageID)
	if a.ExternalID != nil {
		b = append(b, `,"externalId":`...)
		b = schemas.AppendJSONString(b, *a.ExternalID)
	}
	if a.ContactID != nil {
		b = append(b, `,"contactId":`...)
		b = schemas.AppendJSONString(b, *a.ContactID)
	}
	b = append(b, `,"deduplicated":`...)
	b = strconv.AppendBool(b, a.Deduplicated)
	b = schemas.AppendJSONStrings(append(b, `,"warnings":`...), a.Warnings)
	return append(b, '}')
}

// sendOutcome is what send decided: the answer, its status, the envelopes to
// publish, and a refusal instead of all that.
type sendOutcome struct {
	status  int
	answer  sendAnswer
	publish []schemas.Envelope
	refused *refusal
	contact []ingest.Message // what the contact upsert announces (contacts.UpsertMessages)
	outbox  int64            // the contact_outbox row of contact (contacts.UpsertResult.Outbox)
}

// send runs a whole send: dedup, decide, upsert the contact, store, build
// the envelope. Nothing is published here; the caller publishes and only
// then answers.
func (s *service) send(ctx context.Context, ws, wsName, requestID string, req *sendRequest, body []byte) (*sendOutcome, error) {
	sum := sha256.Sum256(body)
	hash := sum[:]
	p, err := s.prepare(ctx, ws, wsName, req, false)
	if err != nil {
		return nil, err
	}
	// A repeated externalId answers the original message, whatever this
	// request says (spec 4.2 rule 2).
	if ex := p.look.Existing; ex != nil {
		return s.repeat(ctx, p, ex, hash)
	}
	if len(p.refusals) > 0 {
		return &sendOutcome{refused: &p.refusals[0]}, nil
	}
	out := &sendOutcome{status: 201}

	// Create or update the contact first (spec 4.2); the plan's limit only
	// means no contact is created.
	if req.Contact != nil && s.contacts != nil {
		res, err := s.contacts.Upsert(ctx, ws, contacts.UpsertInput{Email: req.To, Source: "api", RequestID: requestID, Fields: contacts.Fields{
			FirstName: req.Contact.FirstName, Country: req.Contact.Country, Language: req.Contact.Language, CustomFields: p.custom,
		}})
		switch {
		case errors.Is(err, contacts.ErrContactLimit):
		case err != nil:
			return nil, errInternal{fmt.Errorf("upsert contact: %w", err)}
		default:
			p.contact.ID, p.contact.Status = res.Contact.ID, res.Contact.Status
			out.contact, out.outbox = contacts.UpsertMessages(ws, requestID, res), res.Outbox
		}
	}

	id := schemas.MessageIDOf(ws, req.ExternalID)
	if id == "" {
		id = schemas.NewID()
	}
	payload, env, spill, err := s.envelope(p, id, time.Now().UTC())
	if err != nil {
		return nil, errInternal{err}
	}
	contactID := ""
	if p.contact != nil {
		contactID = p.contact.ID
	}
	createdAt, ok, ex, err := s.store.Claim(ctx, NewMessage{
		ID: id, Workspace: ws, ExternalID: req.ExternalID, RequestHash: hash, To: req.To, ContactID: contactID,
		RFCMessageID: payload.RFCMessageID, PolicyID: p.policy.ID, TemplateID: payload.TemplateID,
		Warnings: p.warnings, Provider: p.policy.Provider, Spill: spill,
	})
	if err != nil {
		return nil, errInternal{err}
	}
	if !ok {
		// A concurrent send with the same externalId stored first.
		p.look.Existing = ex
		o, err := s.repeat(ctx, p, ex, hash)
		if o != nil {
			o.contact = append(out.contact, o.contact...)
		}
		return o, err
	}
	_ = createdAt
	out.answer = sendAnswer{ID: id, Status: schemas.MessageQueued, To: req.To, MessageID: payload.RFCMessageID,
		ExternalID: strPtr(req.ExternalID), ContactID: strPtr(contactID), Warnings: nonNil(p.warnings)}
	out.publish = []schemas.Envelope{env}
	return out, nil
}

// repeat answers a repeated externalId with the original message. While the
// original is still queued and this request is byte-for-byte the same, the
// envelope is published again (same id; the delivery stage sends once), so
// a first attempt whose publish failed after storing is not lost.
func (s *service) repeat(ctx context.Context, p *prepared, ex *Existing, hash []byte) (*sendOutcome, error) {
	out := &sendOutcome{status: 200, answer: sendAnswer{
		ID: ex.ID, Status: ex.Status, To: ex.To, MessageID: ex.MessageID, ExternalID: strPtr(p.req.ExternalID),
		ContactID: ex.ContactID, Deduplicated: true, Warnings: nonNil(ex.Warnings),
	}}
	if ex.Status != schemas.MessageQueued || ex.RequestHash != requestHashHex(hash) {
		return out, nil
	}
	if ex.Spilled {
		out.publish = []schemas.Envelope{s.spilledEnvelope(p.ws, ex.ID, time.Now().UTC())}
		return out, nil
	}
	if len(p.refusals) > 0 || p.compiled == nil {
		return out, nil
	}
	if p.contact != nil && ex.ContactID != nil {
		p.contact.ID = *ex.ContactID
	}
	_, env, spill, err := s.envelope(p, ex.ID, ex.CreatedAt)
	if err != nil {
		return nil, errInternal{err}
	}
	if spill == nil {
		out.publish = []schemas.Envelope{env}
	}
	return out, nil
}

// envelope builds the transactional.send.v1 envelope of message id. spill is
// the encoded payload when it is too large for the broker (the envelope
// then carries a reference).
func (s *service) envelope(p *prepared, id string, at time.Time) (schemas.SendPayload, schemas.Envelope, []byte, error) {
	domain := p.from.Email[strings.LastIndexByte(p.from.Email, '@')+1:]
	pl := schemas.SendPayload{
		MessageID: id, RFCMessageID: email.FormatMessageID(id, domain), ExternalID: p.req.ExternalID,
		WorkspaceName: p.wsName, From: p.from, To: p.req.To, Cc: p.cc, Bcc: p.bcc, ReplyTo: p.req.ReplyTo,
		Policy:   schemas.PolicyRef{ID: p.policy.ID, Key: p.policy.Key, Kind: p.policy.Kind, Provider: p.policy.Provider},
		Language: p.language, Subject: p.src.Subject, Preheader: p.src.Preheader, HTML: p.src.HTML, Text: p.src.Text,
		Data: p.req.DataRaw, DataCompact: p.req.DataCompact, Contact: p.contact, Attachments: p.req.Attachments, AcceptedAt: at,
	}
	if p.tpl != nil {
		pl.TemplateID, pl.TemplateVersion = p.tpl.ID, p.tpl.Version
		if !p.req.HasHTML { // the HTML is the template's (inline HTML wins over a template)
			pl.HTMLJSON = s.templateHTMLJSON(p.tpl, p.language, p.src.HTML)
		}
	} else if p.req.htmlJSON != nil && p.src.HTML == p.req.HTMLContent {
		pl.HTMLJSON = p.req.htmlJSON
	}
	// Sized for the escaped parts (markup's < and > take six bytes each),
	// so the payload is written without regrowing.
	htmlLen := len(pl.HTMLJSON)
	if pl.HTMLJSON == nil {
		htmlLen = schemas.JSONStringLen(pl.HTML)
	}
	size := 1024 + htmlLen + schemas.JSONStringLen(pl.Text) + len(pl.Data) + len(pl.Subject) + len(pl.Preheader)
	b, err := schemas.AppendSendPayload(make([]byte, 0, size), &pl)
	if err != nil {
		return pl, schemas.Envelope{}, nil, err
	}
	if len(b) > spillThreshold {
		return pl, s.spilledEnvelope(p.ws, id, at), b, nil
	}
	// AppendSendPayload writes compact JSON with <, > and & escaped, as
	// json.Marshal does: nothing for AppendEnvelope to check or clean.
	return pl, schemas.Envelope{ID: id, Workspace: p.ws, Type: schemas.TypeTransactionalSend, Key: p.ws + ":" + id,
		OccurredAt: at, Payload: b, PayloadCompact: true}, nil, nil
}

func (s *service) spilledEnvelope(ws, id string, at time.Time) schemas.Envelope {
	b, _ := json.Marshal(schemas.SendPayload{MessageID: id, Spilled: true, AcceptedAt: at})
	return schemas.Envelope{ID: id, Workspace: ws, Type: schemas.TypeTransactionalSend, Key: ws + ":" + id, OccurredAt: at, Payload: b, PayloadCompact: true}
}
