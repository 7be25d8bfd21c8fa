package transactional

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"sendstream/ingest/contacts"
	"sendstream/schemas"
	"sendstream/sinks/email"
	"sendstream/sinks/email/render"
)

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
