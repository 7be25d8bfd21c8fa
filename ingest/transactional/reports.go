package transactional

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"sendstream/ingest"
	"sendstream/schemas"
)

// Provider reports move sent messages to delivered, bounced or complained
// (spec 3.1), suppress hard-bounced and complaining addresses, and publish
// EMAIL_DELIVERED, EMAIL_BOUNCED and EMAIL_COMPLAINED plus a status envelope
// on TopicMessageStatus for the ClickHouse message log. Each (message,
// status) happens at most once, so the envelopes' ids derive from the
// message id and the status and repeated reports publish nothing new.
//
// That is why a report's envelopes are written to the contacts outbox in
// the transaction that moves the status (contacts.Store.InOutbox): a
// process dying between that commit and the publish would otherwise lose
// them for good, since the provider's retry finds the status already moved.
// The answer still waits for the broker's ack (its 2xx means published);
// the ack deletes the outbox rows, and rows a crash, a failed publish or a
// time-out left behind are published by the contacts relay, once, under
// the same ids.

// providerReport is one report in Sendstream's terms.
type providerReport struct {
	Ref           string // service id, Message-ID, or ext:<externalId>
	Status        string
	Email         string
	BounceType    string
	Reason        string
	ComplaintType string
	At            time.Time
	Provider      string
}

// reportResult is the outcome of one report, as the generic endpoint answers.
type reportResult struct {
	MessageID string  `json:"messageId"`
	Found     bool    `json:"found"`
	Applied   bool    `json:"applied"`
	Status    *string `json:"status"`
}

// applied is what a call's reports did: their outcomes, the envelopes to
// publish and the contacts outbox rows holding them.
type applied struct {
	results []reportResult
	publish []ingest.Message
	outbox  []int64
}

// apply runs reports and returns what they did. ws limits them to one
// workspace ("" for SES, which is trusted by signature and finds messages
// by Message-ID).
func (a *api) apply(ctx context.Context, ws string, reports []providerReport) (applied, error) {
	var out applied
	for _, r := range reports {
		ref := strings.Trim(r.Ref, "<> ")
		if strings.HasPrefix(ref, "ext:") && ws != "" {
			ex, err := a.store.Existing(ctx, ws, strings.TrimPrefix(ref, "ext:"))
			if err != nil {
				return applied{}, err
			}
			if ex == nil {
				out.results = append(out.results, reportResult{MessageID: r.Ref})
				continue
			}
			ref = ex.ID
		}
		rep := Report{Ref: ref, Workspace: ws, Status: r.Status, At: r.At,
			BounceType: r.BounceType, Reason: r.Reason, ComplaintType: r.ComplaintType, Email: reportedEmail(r.Email)}
		res, msgs, ids, err := a.applyOne(ctx, rep, r)
		if err != nil {
			return applied{}, err
		}
		rr := reportResult{MessageID: r.Ref, Found: res.Found, Applied: res.Moved}
		if res.Found {
			st := res.Previous
			if res.Moved {
				st = r.Status
			}
			rr.Status = &st
			rr.MessageID = res.MessageID
		}
		out.results = append(out.results, rr)
		out.publish = append(out.publish, msgs...)
		out.outbox = append(out.outbox, ids...)
	}
	return out, nil
}

// applyOne applies one report and returns its envelopes; with a contacts
// store they are written to its outbox in the report's transaction, and
// their row ids returned too.
func (a *api) applyOne(ctx context.Context, rep Report, r providerReport) (ReportResult, []ingest.Message, []int64, error) {
	if a.svc.contacts == nil {
		res, err := a.store.ApplyReport(ctx, rep)
		if err != nil || !res.Moved {
			return res, nil, nil, err
		}
		return res, reportEnvelopes(res, r), nil, nil
	}
	var res ReportResult
	write := func(tx pgx.Tx) (err error) {
		res, err = a.store.ApplyReportTx(ctx, tx, rep)
		return err
	}
	announce := func() []ingest.Message {
		if !res.Moved {
			return nil
		}
		return reportEnvelopes(res, r)
	}
	msgs, ids, err := a.svc.contacts.InOutbox(ctx, write, announce)
	if err != nil {
		return ReportResult{}, nil, nil, err
	}
	return res, msgs, ids, nil
}

// answer is the 200 of a report call: it publishes the envelopes before
// answering; when they are in the outbox, a failed publish answers 503
// saying they will still be delivered, and the ack deletes their rows.
func (a *api) answer(ap applied) ingest.Result {
	res := ingest.Result{Status: 200, Body: map[string]any{"results": nonNilResults(ap.results)}, Publish: ap.publish}
	if len(ap.publish) > 0 {
		res.Stored = true
		if len(ap.outbox) == len(ap.publish) {
			res.Outboxed = true
			ids := ap.outbox
			res.Published = func() { a.svc.contacts.Published(ids...) }
		}
	}
	return res
}

// reportEnvelopes are the webhook and status envelopes of one applied
// report.
func reportEnvelopes(res ReportResult, r providerReport) []ingest.Message {
	provider := r.Provider
	if provider == "" {
		provider = res.Provider
	}
	at := r.At.UTC()
	key := res.Workspace + ":" + res.MessageID
	var typ string
	var data any
	detail := ""
	switch r.Status {
	case schemas.MessageDelivered:
		typ = schemas.TypeWebhookEmailDelivered
		data = schemas.MessageEventData{MessageID: res.MessageID, RFCMessageID: res.RFCID, Email: res.To,
			ExternalID: res.ExternalID, Provider: provider, OccurredAt: at}
	case schemas.MessageBounced:
		typ = schemas.TypeWebhookEmailBounced
		data = schemas.EmailBouncedData{Email: res.To, MessageID: res.MessageID, Provider: provider, Type: r.BounceType,
			Reason: r.Reason, OccurredAt: at, RFCMessageID: res.RFCID, ExternalID: res.ExternalID}
		detail = r.BounceType + ": " + r.Reason
	case schemas.MessageComplained:
		typ = schemas.TypeWebhookEmailComplained
		data = schemas.EmailComplainedData{Email: res.To, MessageID: res.MessageID, Provider: provider, Type: r.ComplaintType,
			OccurredAt: at, RFCMessageID: res.RFCID, ExternalID: res.ExternalID}
		detail = r.ComplaintType
	default:
		return nil
	}
	wb, _ := json.Marshal(data)
	sb, _ := json.Marshal(schemas.StatusPayload{MessageID: res.MessageID, Status: r.Status, At: at, To: res.To,
		ExternalID: res.ExternalID, TemplateID: res.TemplateID, PolicyID: res.PolicyID, Provider: provider, Detail: detail})
	return []ingest.Message{
		{Topic: schemas.TopicWebhooks, Env: schemas.Envelope{ID: schemas.ChildID(res.MessageID, typ, 0), Workspace: res.Workspace,
			Type: typ, Key: key, OccurredAt: at, CausationID: res.MessageID, Payload: wb}},
		{Topic: schemas.TopicMessageStatus, Env: schemas.Envelope{ID: schemas.ChildID(res.MessageID, schemas.TypeTransactionalStatus+"/"+r.Status, 0),
			Workspace: res.Workspace, Type: schemas.TypeTransactionalStatus, Key: key, OccurredAt: at, CausationID: res.MessageID, Payload: sb}},
	}
}

// genericReports is the body of POST /api/providers/reports, the documented
// format for any provider: up to 100 reports per call.
type genericReports struct {
	Reports []genericReport `json:"reports"`
}

type genericReport struct {
	Type          string `json:"type"`      // delivered, bounced or complained
	MessageID     string `json:"messageId"` // service id, ext:<externalId> or Message-ID
	Email         string `json:"email"`     // the reported address; default the recipient
	BounceType    string `json:"bounceType"`
	Reason        string `json:"reason"`
	ComplaintType string `json:"complaintType"`
	OccurredAt    string `json:"occurredAt"`
	Provider      string `json:"provider"`
}

// MaxReports bounds one generic report call.
const MaxReports = 100

// genericReport is POST /api/providers/reports (API key with
// transactional:write; only the key's workspace's messages).
func (a *api) genericReport(c *ingest.Call) ingest.Result {
	var body genericReports
	if err := json.Unmarshal(c.Body, &body); err != nil {
		return ingest.Fail(400, codeValidation, "Invalid input: body must be {\"reports\": [...]}", "reports")
	}
	var errs fieldErrs
	if len(body.Reports) == 0 || len(body.Reports) > MaxReports {
		errs.add("reports", fmt.Sprintf("must hold 1 to %d reports", MaxReports))
	}
	var reports []providerReport
	for i, g := range body.Reports {
		f := func(n string) string { return fmt.Sprintf("reports[%d].%s", i, n) }
		r := providerReport{Ref: g.MessageID, Status: g.Type, Email: g.Email, Reason: g.Reason, Provider: g.Provider, At: time.Now().UTC()}
		// bounceType is an enum of the document whatever the type: a
		// value outside it is refused, not ignored.
		if g.BounceType != "" && g.BounceType != "hard" && g.BounceType != "soft" {
			errs.add(f("bounceType"), "must be hard or soft")
		}
		switch g.Type {
		case schemas.MessageDelivered:
		case schemas.MessageBounced:
			r.BounceType = g.BounceType
			if r.BounceType == "" {
				r.BounceType = "hard"
			}
		case schemas.MessageComplained:
			r.ComplaintType = g.ComplaintType
			if r.ComplaintType == "" {
				r.ComplaintType = "complaint"
			}
		default:
			errs.add(f("type"), "must be delivered, bounced or complained")
		}
		if strings.TrimSpace(g.MessageID) == "" {
			errs.add(f("messageId"), "is required")
		}
		if g.OccurredAt != "" {
			t, err := time.Parse(time.RFC3339, g.OccurredAt)
			if err != nil {
				errs.add(f("occurredAt"), "must be an RFC 3339 date-time")
			}
			r.At = t
		}
		if r.Provider == "" {
			r.Provider = "generic"
		}
		reports = append(reports, r)
	}
	if !errs.empty() {
		return ingest.Fail(400, codeValidation, errs.message(), errs.fields...)
	}
	ap, err := a.apply(c.Ctx, c.Principal.Workspace, reports)
	if err != nil {
		return a.internal(err)
	}
	return a.answer(ap)
}

// sesNotification is an Amazon SES notification (the Message of an SNS
// notification), in the notification or the event-publishing form.
type sesNotification struct {
	NotificationType string `json:"notificationType"`
	EventType        string `json:"eventType"`
	Mail             struct {
		MessageID     string `json:"messageId"`
		Timestamp     string `json:"timestamp"`
		Headers       []struct{ Name, Value string }
		CommonHeaders struct {
			MessageID string `json:"messageId"`
		} `json:"commonHeaders"`
	} `json:"mail"`
	Bounce *struct {
		BounceType        string `json:"bounceType"`
		BounceSubType     string `json:"bounceSubType"`
		BouncedRecipients []struct {
			EmailAddress   string `json:"emailAddress"`
			DiagnosticCode string `json:"diagnosticCode"`
			Status         string `json:"status"`
		} `json:"bouncedRecipients"`
		Timestamp string `json:"timestamp"`
	} `json:"bounce"`
	Complaint *struct {
		ComplainedRecipients []struct {
			EmailAddress string `json:"emailAddress"`
		} `json:"complainedRecipients"`
		ComplaintFeedbackType string `json:"complaintFeedbackType"`
		Timestamp             string `json:"timestamp"`
	} `json:"complaint"`
	Delivery *struct {
		Recipients []string `json:"recipients"`
		Timestamp  string   `json:"timestamp"`
	} `json:"delivery"`
}

// reports turns a SES notification into reports; the message is found by
// our X-Sendstream-Message-Id header when SES passes headers, else by the
// Message-ID header.
func (n sesNotification) reports() []providerReport {
	ref := strings.Trim(n.Mail.CommonHeaders.MessageID, "<> ")
	for _, h := range n.Mail.Headers {
		switch {
		case strings.EqualFold(h.Name, "X-Sendstream-Message-Id"):
			ref = strings.TrimSpace(h.Value)
		case strings.EqualFold(h.Name, "Message-ID") && ref == "":
			ref = strings.Trim(h.Value, "<> ")
		}
	}
	kind := n.NotificationType
	if kind == "" {
		kind = n.EventType
	}
	at := func(s string) time.Time {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			return t.UTC()
		}
		return time.Now().UTC()
	}
	var out []providerReport
	switch {
	case kind == "Bounce" && n.Bounce != nil:
		typ := "soft"
		if n.Bounce.BounceType == "Permanent" {
			typ = "hard"
		}
		for _, r := range n.Bounce.BouncedRecipients {
			reason := r.DiagnosticCode
			if reason == "" {
				reason = n.Bounce.BounceType + "/" + n.Bounce.BounceSubType
			}
			out = append(out, providerReport{Ref: ref, Status: schemas.MessageBounced, Email: r.EmailAddress,
				BounceType: typ, Reason: reason, At: at(n.Bounce.Timestamp), Provider: "ses"})
		}
	case kind == "Complaint" && n.Complaint != nil:
		ft := n.Complaint.ComplaintFeedbackType
		if ft == "" {
			ft = "complaint"
		}
		for _, r := range n.Complaint.ComplainedRecipients {
			out = append(out, providerReport{Ref: ref, Status: schemas.MessageComplained, Email: r.EmailAddress,
				ComplaintType: ft, At: at(n.Complaint.Timestamp), Provider: "ses"})
		}
	case kind == "Delivery" && n.Delivery != nil:
		for _, r := range n.Delivery.Recipients {
			out = append(out, providerReport{Ref: ref, Status: schemas.MessageDelivered, Email: r,
				At: at(n.Delivery.Timestamp), Provider: "ses"})
		}
	}
	return out
}

// sesReport is POST /api/providers/ses: Amazon SES notifications through an
// SNS HTTPS subscription, authenticated by the SNS signature.
func (a *api) sesReport(c *ingest.Call) ingest.Result {
	if !snsMediaType(c.Header("Content-Type")) {
		return ingest.Fail(415, "unsupported_media_type", "An SNS message is text/plain (as SNS sends it) or application/json")
	}
	m, err := parseSNS(c.Body)
	if err != nil {
		return ingest.Fail(400, codeValidation, err.Error())
	}
	if err := a.sns.Verify(c.Ctx, m); err != nil {
		a.log.Warn("SNS message refused", "err", err, "topic", m.TopicArn)
		return ingest.Fail(403, "invalid_signature", "SNS message refused: "+err.Error())
	}
	switch m.Type {
	case "SubscriptionConfirmation":
		if err := a.sns.cfg.Confirm(c.Ctx, m.SubscribeURL); err != nil {
			a.log.Error("SNS subscription confirmation failed", "err", err, "topic", m.TopicArn)
			return ingest.Fail(502, "confirmation_failed", "Could not confirm the SNS subscription: "+err.Error())
		}
		return ingest.OK(200, map[string]any{"confirmed": true})
	case "UnsubscribeConfirmation":
		return ingest.OK(200, map[string]any{"confirmed": false})
	}
	var n sesNotification
	if err := json.Unmarshal([]byte(m.Message), &n); err != nil {
		return ingest.Fail(400, codeValidation, "SNS notification does not carry an SES notification")
	}
	ap, err := a.apply(c.Ctx, "", n.reports())
	if err != nil {
		return a.internal(err)
	}
	return a.answer(ap)
}

func nonNilResults(r []reportResult) []reportResult {
	if r == nil {
		return []reportResult{}
	}
	return r
}

// reportedEmail is the stored form of the address a provider's report
// names (schemas.NormalizeEmail), so a report spelling the domain in
// Unicode finds the contact and the suppression stored in ASCII; an
// address the rule refuses is kept trimmed and lower-cased, since a report
// is not refused for its address.
func reportedEmail(s string) string {
	if e, err := schemas.NormalizeEmail(s); err == nil {
		return e
	}
	return strings.ToLower(strings.TrimSpace(s))
}

// snsMediaType reports whether an SNS delivery's Content-Type is one the
// document takes: text/plain (what SNS sends), application/json or
// application/*+json, any parameters, or none.
func snsMediaType(ct string) bool {
	if strings.TrimSpace(ct) == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "text/plain" || mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}
