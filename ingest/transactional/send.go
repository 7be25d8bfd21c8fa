package transactional

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"sendstream/ingest"
	"sendstream/ingest/contacts"
	"sendstream/schemas"
	"sendstream/sinks/email"
	"sendstream/sinks/email/render"
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

// refusal is an answer a send gives instead of accepting: the status, code
// and message of the error body, plus missing variables.
type refusal struct {
	Status  int      `json:"status"`
	Code    string   `json:"code"`
	Error   string   `json:"error"`
	Missing []string `json:"missing,omitempty"`
	Fields  []string `json:"fields,omitempty"`
}

// prepared is a send decided up to the point of storing it.
type prepared struct {
	ws       string
	wsName   string
	req      *sendRequest
	look     Lookup
	policy   Policy
	from     schemas.Address
	tpl      *Template
	language string
	src      render.Source
	compiled *render.Compiled
	bindings render.Bindings
	contact  *schemas.RecipientContact
	custom   map[string]any // validated custom field patch of the contact object
	cc, bcc  []string

	variables, unresolved, warnings []string
	refusals                        []refusal
	out                             *render.Output // the rendered message, when rendering succeeded
}

func (p *prepared) refuse(status int, code, msg string) {
	p.refusals = append(p.refusals, refusal{Status: status, Code: code, Error: msg})
}

// service is the transactional domain: deciding, storing and publishing
// sends; the handlers call it.
type service struct {
	store    *Store
	contacts *contacts.Store
	engine   *render.Engine
	defFrom  string

	tplMu sync.Mutex
	tpls  map[string]*Template // by id; replaced when the stored version moves
	// tplHTML holds each template version's HTML (per language) encoded
	// as a JSON string, for the send envelope.
	tplHTML map[tplHTMLKey][]byte
}

// tplHTMLKey names one template version's HTML in one language.
type tplHTMLKey struct {
	id      string
	version int64
	lang    string
}

// templateHTMLJSON returns html, the HTML of template t in language lang,
// encoded as a JSON string, from the cache after the first time.
func (s *service) templateHTMLJSON(t *Template, lang, html string) []byte {
	k := tplHTMLKey{t.ID, t.Version, lang}
	s.tplMu.Lock()
	enc, ok := s.tplHTML[k]
	s.tplMu.Unlock()
	if ok {
		return enc
	}
	enc = schemas.AppendJSONString(nil, html)
	s.tplMu.Lock()
	if s.tplHTML == nil || len(s.tplHTML) > 10000 {
		s.tplHTML = map[tplHTMLKey][]byte{}
	}
	s.tplHTML[k] = enc
	s.tplMu.Unlock()
	return enc
}

// errInternal wraps failures of the stores (answered 500).
type errInternal struct{ err error }

func (e errInternal) Error() string { return e.err.Error() }
func (e errInternal) Unwrap() error { return e.err }

// rawScanBudget bounds the bytes of data a send scans to resolve its
// variables without decoding the data (variables × data size).
const rawScanBudget = 256 << 10

// prepare decides a send: lookups, policy, template, sender, suppression,
// contact, rendering check and variables. Refusals are collected in order
// of precedence; a send answers the first, validate lists them all.
// full also renders the message (validate shows it).
func (s *service) prepare(ctx context.Context, ws, wsName string, req *sendRequest, full bool) (*prepared, error) {
	p := &prepared{ws: ws, wsName: wsName, req: req}
	addrs := append([]string{req.To}, req.Cc...)
	addrs = append(addrs, req.Bcc...)
	tplID := ""
	if !req.HasHTML {
		tplID = req.TemplateID
	}
	look, err := s.store.Lookup(ctx, ws, LookupInput{Email: req.To, Addresses: addrs, PolicyRef: req.SendPolicy, TemplateID: tplID, ExternalID: req.ExternalID})
	if err != nil {
		return nil, errInternal{err}
	}
	p.look = look

	// Send policy.
	if look.Policy == nil {
		p.refuse(400, CodePolicyNotFound, fmt.Sprintf("Send policy %q does not exist in this workspace", req.SendPolicy))
		return p, nil
	}
	p.policy = *look.Policy

	// Template (htmlContent wins when both are sent).
	if !req.HasHTML {
		if look.TemplateVersion == 0 {
			p.refuse(404, CodeTemplateNotFound, fmt.Sprintf("Template %q not found in this workspace", req.TemplateID))
			return p, nil
		}
		t, err := s.template(ctx, ws, req.TemplateID, look.TemplateVersion)
		if errors.Is(err, ErrTemplateNotFound) {
			p.refuse(404, CodeTemplateNotFound, fmt.Sprintf("Template %q not found in this workspace", req.TemplateID))
			return p, nil
		}
		if err != nil {
			return nil, errInternal{err}
		}
		p.tpl = t
	}

	// Contact as the template sees it: the stored one with the request's
	// contact object applied (validated against the custom field settings).
	if err := s.mergeContact(ctx, p); err != nil {
		return nil, err
	}

	// Content and language.
	if p.tpl != nil {
		lang := req.Language
		if lang == "" && p.contact != nil {
			lang = p.contact.Language
		}
		p.src, p.language = p.tpl.source(lang)
		if req.Subject != "" {
			p.src.Subject = req.Subject
		}
		if strings.TrimSpace(p.src.Subject) == "" {
			p.refusals = append(p.refusals, refusal{Status: 400, Code: codeValidation, Error: "Invalid input: subject is required (the template has none)", Fields: []string{"subject"}})
			return p, nil
		}
	} else {
		p.src = render.Source{Subject: req.Subject, HTML: req.HTMLContent}
		p.language = req.Language
	}

	// Sender.
	if req.FromEmail != "" {
		domain := req.FromEmail[strings.LastIndexByte(req.FromEmail, '@')+1:]
		if !contains(look.Domains, domain) {
			p.refuse(403, CodeSenderNotAllowed, fmt.Sprintf("fromEmail must be on a domain this workspace owns; %s is not one (add it with `sendstream admin domain add`)", domain))
		}
		p.from = schemas.Address{Email: req.FromEmail, Name: p.policy.FromName}
	} else {
		p.from = schemas.Address{Email: email.DefaultSender(p.policy.FromEmail, look.Domains, s.defFrom), Name: p.policy.FromName}
	}

	// Template syntax.
	compiled, err := s.engine.Compile(p.src)
	if err != nil {
		var se *render.SyntaxError
		if !errors.As(err, &se) {
			return nil, errInternal{err}
		}
		p.refuse(400, CodeTemplateError, "Template error: "+se.Msg)
		return p, nil
	}
	p.compiled = compiled

	// Suppression (spec 3.1): bounced, complained and erased always;
	// unsubscribed under a marketing policy. Suppressed cc and bcc
	// addresses are dropped.
	marketing := p.policy.Kind == schemas.PolicyMarketing
	if why := suppressedReason(look.Suppressed[req.To], p.storedStatus(), marketing); why != "" {
		p.refuse(422, CodeSuppressed, fmt.Sprintf("Recipient %s is suppressed: the address %s", req.To, why))
	}
	keep := func(list []string) []string {
		var out []string
		for _, a := range list {
			if suppressedReason(look.Suppressed[a], "", marketing) == "" && a != req.To {
				out = append(out, a)
			}
		}
		return out
	}
	p.cc, p.bcc = keep(req.Cc), keep(req.Bcc)

	// Marketing needs a contact for the unsubscribe link (spec 4.2 rule 4).
	if marketing && look.Contact == nil && req.Contact == nil {
		p.refuse(422, CodeMarketingContact, "A marketing send policy needs a contact: the recipient is not a contact and the request carries no contact object")
	}

	// Variables (spec 4.2 rule 5). A send only checks which paths have
	// values: against the data as JSON (a scan per path) unless that would
	// scan more than decoding once does. Validate renders, so it decodes.
	p.variables = compiled.Variables()
	if full || len(p.variables)*len(req.DataRaw) > rawScanBudget {
		data, _, err := render.DecodeData(req.DataRaw)
		if err != nil {
			return nil, errInternal{err}
		}
		p.bindings = render.NewBindings(data, p.renderContact(), p.customFields())
	} else {
		p.bindings = render.NewRawBindings(req.DataRaw, p.renderContact(), p.customFields())
	}
	p.unresolved = p.bindings.Unresolved(p.variables)
	var required []string
	if p.tpl != nil {
		required = p.tpl.Required
	}
	missing := p.bindings.Unresolved(required)
	if req.Strict {
		missing = union(missing, p.unresolved)
	}
	if len(missing) > 0 {
		p.refusals = append(p.refusals, refusal{Status: 422, Code: CodeMissingVariables, Missing: missing,
			Error: "Missing template variables: " + strings.Join(missing, ", ")})
	}
	for _, v := range p.unresolved {
		if !contains(missing, v) {
			p.warnings = append(p.warnings, v)
		}
	}

	// Validate renders the message as delivery will, so a template that
	// fails at run time (a filter given a wrong argument) shows there. A
	// send checks the render under the same budget as delivery (Check: the
	// text part is not derived), so a template that exceeds a render budget
	// (loop iterations, output bytes, time) is refused here and never
	// reaches the delivery stage; one that fails otherwise while rendering
	// is accepted and failed by the delivery stage with a "template error"
	// reason, as before.
	var out render.Output
	if full {
		out, err = compiled.Render(p.bindings)
	} else {
		err = compiled.Check(p.bindings)
	}
	var re *render.RenderError
	var be *render.BudgetError
	switch {
	case errors.As(err, &be):
		p.refuse(400, CodeTemplateError, "Template error: "+be.Error())
	case errors.As(err, &re):
		if full {
			p.refuse(400, CodeTemplateError, "Template error: "+re.Msg)
		}
	case err != nil:
		return nil, errInternal{err}
	case full:
		p.out = &out
	}
	sortRefusals(p.refusals)
	return p, nil
}

// sortRefusals orders refusals by precedence: 400 input, 403 sender,
// 400 template error, 422 suppression, 422 marketing contact, 422 variables.
func sortRefusals(r []refusal) {
	rank := map[string]int{codeValidation: 0, CodePolicyNotFound: 1, CodeTemplateNotFound: 2, CodeSenderNotAllowed: 3,
		CodeTemplateError: 4, CodeSuppressed: 5, CodeMarketingContact: 6, CodeMissingVariables: 7}
	sort.SliceStable(r, func(i, j int) bool { return rank[r[i].Code] < rank[r[j].Code] })
}

// storedStatus is the recipient contact's status, "" when none.
func (p *prepared) storedStatus() string {
	if p.look.Contact == nil {
		return ""
	}
	return p.look.Contact.Status
}

// suppressedReason explains why an address may not receive mail, or "".
func suppressedReason(reasons []string, contactStatus string, marketing bool) string {
	for _, r := range reasons {
		switch r {
		case "bounced":
			return "bounced"
		case "complained":
			return "complained (marked mail as spam)"
		case "erased":
			return "was erased"
		}
	}
	switch contactStatus {
	case contacts.StatusBounced:
		return "bounced"
	case contacts.StatusComplained:
		return "complained (marked mail as spam)"
	}
	if marketing {
		if contactStatus == contacts.StatusUnsubscribed || contains(reasons, "unsubscribed") {
			return "unsubscribed from marketing email"
		}
	}
	return ""
}

// mergeContact builds p.contact from the stored contact and the request's
// contact object.
func (s *service) mergeContact(ctx context.Context, p *prepared) error {
	st, in := p.look.Contact, p.req.Contact
	if st == nil && in == nil {
		return nil
	}
	c := &schemas.RecipientContact{Email: p.req.To}
	if st != nil {
		c.ID, c.Status = st.ID, st.Status
		c.FirstName, c.Country, c.Language = deref(st.FirstName), deref(st.Country), deref(st.Language)
		c.CustomFields = st.CustomFields
	}
	if in != nil {
		if in.FirstName != nil {
			c.FirstName = *in.FirstName
		}
		if in.Country != nil {
			c.Country = *in.Country
		}
		if in.Language != nil {
			c.Language = *in.Language
		}
		if len(in.CustomFields) > 0 && s.contacts != nil {
			patch, bad, err := s.contacts.CustomFieldPatch(ctx, p.ws, in.CustomFields)
			if err != nil {
				return errInternal{err}
			}
			if len(bad) > 0 {
				fields := make([]string, len(bad))
				for i, k := range bad {
					fields[i] = "contact.customFields." + k
				}
				p.refusals = append(p.refusals, refusal{Status: 400, Code: codeValidation, Fields: fields,
					Error: "Invalid input: " + strings.Join(fields, ", ") + " has the wrong type for the custom field"})
			}
			p.custom = patch
			merged := map[string]any{}
			for k, v := range c.CustomFields {
				merged[k] = v
			}
			for k, v := range patch {
				if v == nil {
					delete(merged, k)
				} else {
					merged[k] = v
				}
			}
			c.CustomFields = merged
		}
		if st != nil && s.contacts != nil { // the update may not grow the contact past what its events carry
			f := contacts.Fields{FirstName: in.FirstName, Country: in.Country, Language: in.Language, CustomFields: p.custom}
			field, msg, err := s.contacts.CheckGrowth(ctx, p.ws, p.req.To, f)
			if err != nil {
				return errInternal{err}
			}
			if field != "" {
				p.refusals = append(p.refusals, refusal{Status: 400, Code: codeValidation, Fields: []string{"contact." + field},
					Error: "Invalid input: contact." + field + " " + msg})
			}
		}
	}
	p.contact = c
	return nil
}

func (p *prepared) renderContact() *render.Contact {
	if p.contact == nil {
		return nil
	}
	c := p.contact
	return &render.Contact{ID: c.ID, Email: c.Email, FirstName: c.FirstName, Country: c.Country, Language: c.Language, Status: c.Status}
}

func (p *prepared) customFields() map[string]any {
	if p.contact == nil {
		return nil
	}
	return p.contact.CustomFields
}

// template returns a workspace's template at the stored version, from the
// cache when that version was read before.
func (s *service) template(ctx context.Context, ws, id string, version int64) (*Template, error) {
	s.tplMu.Lock()
	t := s.tpls[id]
	s.tplMu.Unlock()
	if t != nil && t.Version == version {
		return t, nil
	}
	loaded, err := s.store.Template(ctx, ws, id)
	if err != nil {
		return nil, err
	}
	s.tplMu.Lock()
	if cur := s.tpls[id]; cur == nil || cur.Version < loaded.Version {
		if len(s.tpls) > 10000 {
			clear(s.tpls)
		}
		s.tpls[id] = &loaded
	}
	s.tplMu.Unlock()
	return &loaded, nil
}

// source returns the template's parts in the language asked for (exact, then
// its primary subtag), with missing parts from the default language, and the
// language used ("" for the default).
func (t *Template) source(lang string) (render.Source, string) {
	src := render.Source{Subject: t.Subject, Preheader: t.Preheader, HTML: t.HTML, Text: t.Text}
	if lang == "" || len(t.Translations) == 0 {
		return src, ""
	}
	tr, used, ok := t.translation(lang)
	if !ok {
		return src, ""
	}
	if tr.Subject != "" {
		src.Subject = tr.Subject
	}
	if tr.Preheader != "" {
		src.Preheader = tr.Preheader
	}
	if tr.HTML != "" {
		src.HTML = tr.HTML
	}
	if tr.Text != "" {
		src.Text = tr.Text
	}
	return src, used
}

func (t *Template) translation(lang string) (Translation, string, bool) {
	want := strings.ToLower(strings.ReplaceAll(lang, "_", "-"))
	primary, _, _ := strings.Cut(want, "-")
	var best string
	for k := range t.Translations {
		lk := strings.ToLower(strings.ReplaceAll(k, "_", "-"))
		if lk == want {
			return t.Translations[k], k, true
		}
		if lk == primary {
			best = k
		}
	}
	if best != "" {
		return t.Translations[best], best, true
	}
	return Translation{}, "", false
}

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

// validateAnswer is the body of POST /v1/transactional/validate.
type validateAnswer struct {
	Valid      bool      `json:"valid"`
	Subject    *string   `json:"subject"`
	Preheader  *string   `json:"preheader,omitempty"`
	HTML       *string   `json:"html"`
	Text       *string   `json:"text"`
	Variables  []string  `json:"variables"`
	Unresolved []string  `json:"unresolved"`
	Warnings   []string  `json:"warnings"`
	Missing    []string  `json:"missing"`
	Errors     []refusal `json:"errors"`
	Language   string    `json:"language,omitempty"`
	From       string    `json:"from,omitempty"`
}

// validate renders exactly as a send would and stores nothing.
func (s *service) validate(ctx context.Context, ws, wsName string, req *sendRequest) (validateAnswer, error) {
	p, err := s.prepare(ctx, ws, wsName, req, true)
	if err != nil {
		return validateAnswer{}, err
	}
	a := validateAnswer{Variables: nonNil(p.variables), Unresolved: nonNil(p.unresolved), Warnings: nonNil(p.warnings),
		Missing: []string{}, Errors: p.refusals, Language: p.language, From: p.from.Email}
	for _, r := range p.refusals {
		a.Missing = append(a.Missing, r.Missing...)
	}
	if out := p.out; out != nil {
		a.Subject, a.HTML, a.Text = &out.Subject, &out.HTML, &out.Text
		if out.Preheader != "" {
			a.Preheader = &out.Preheader
		}
	}
	if a.Errors == nil {
		a.Errors = []refusal{}
	}
	a.Valid = len(a.Errors) == 0
	return a, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func union(a, b []string) []string {
	out := append([]string(nil), a...)
	for _, v := range b {
		if !contains(out, v) {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
