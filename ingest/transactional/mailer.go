package transactional

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/email"
	"sendstream/sinks/email/render"
	"sendstream/sinks/ttlcache"
)

// Mailer is the transactional send for stages (pipeline.Mailer): the
// journey engine's send_email steps go through it, so they get exactly
// what POST /v1/transactional/send gives (policy, suppression, the
// marketing unsubscribe link, DKIM and the message log at delivery) and
// the same idempotency: a request is turned into the JSON body the
// endpoint would receive and decided by the same service, so a repeated
// ExternalID answers the original message and republishes it only while
// it is still queued. Safe for concurrent use.
type Mailer struct {
	svc   *service
	names *ttlcache.Cache[string] // workspace → its name (MailerWorkspaceTTL)
}

// MailerWorkspaceTTL is how long the Mailer reuses a workspace's name (the
// sender name its messages carry): one Postgres read per workspace and
// second instead of one per send, as the send endpoint takes the name
// from its API key cache. A gone workspace is never cached: it is looked
// up again, and refused, on every send.
const MailerWorkspaceTTL = time.Second

// errWorkspaceGone is a workspace the Mailer found no row of (not cached).
var errWorkspaceGone = errors.New("the workspace is gone")

var _ pipeline.Mailer = (*Mailer)(nil)

// NewMailer returns the Mailer over d (PG and Secret required, as for
// Routes; Contacts is not used: a stage's request carries no contact
// object).
func NewMailer(d Deps) (*Mailer, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	if d.Engine == nil {
		d.Engine = render.Shared(render.DefaultBudget())
	}
	if d.DefaultFromEmail == "" {
		d.DefaultFromEmail = email.DefaultFromEmail
	}
	return &Mailer{svc: &service{store: NewStore(d.PG), engine: d.Engine, defFrom: d.DefaultFromEmail,
		tpls: map[string]*Template{}}, names: ttlcache.NewCache[string](MailerWorkspaceTTL)}, nil
}

// mailBody is the send endpoint's body of a MailRequest.
type mailBody struct {
	To         string          `json:"to"`
	TemplateID string          `json:"templateId"`
	SendPolicy string          `json:"sendPolicy,omitempty"`
	Subject    string          `json:"subject,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
	ExternalID string          `json:"externalId"`
}

// SendEmail decides m as the send endpoint would decide its body. A
// refusal (suppressed, no such policy or template, missing variables, a
// body the endpoint would answer 400) is a result, not an error; errors
// are the stores' and mean nothing was decided.
func (m *Mailer) SendEmail(ctx context.Context, r schemas.MailRequest) (schemas.MailResult, error) {
	if r.ExternalID == "" {
		return schemas.MailResult{}, errors.New("transactional mailer: ExternalID is required (the idempotency key)")
	}
	data := r.Data
	if t := strings.TrimSpace(string(data)); t == "" || t == "null" || t[0] != '{' {
		data = nil // only an object is data; the rest renders as no data
	}
	body, err := json.Marshal(mailBody{To: r.To, TemplateID: r.TemplateID, SendPolicy: r.SendPolicy, Subject: r.Subject,
		Data: data, ExternalID: r.ExternalID})
	if err != nil {
		return schemas.MailResult{}, fmt.Errorf("transactional mailer: encode %s: %w", r.ExternalID, err)
	}
	req, errs := parseSend(body, nil, r.Workspace)
	if !errs.empty() {
		return schemas.MailResult{RefusedCode: codeValidation, Refused: errs.message()}, nil
	}
	name, err := m.names.Get(ctx, r.Workspace, func(ctx context.Context) (string, error) {
		name, found, err := m.svc.store.WorkspaceName(ctx, r.Workspace)
		if err == nil && !found {
			err = errWorkspaceGone
		}
		return name, err
	})
	if errors.Is(err, errWorkspaceGone) {
		return schemas.MailResult{RefusedCode: CodeMessageNotFound, Refused: "the workspace is gone"}, nil
	}
	if err != nil {
		return schemas.MailResult{}, fmt.Errorf("transactional mailer: %w", err)
	}
	out, err := m.svc.send(ctx, r.Workspace, name, r.ExternalID, req, body)
	if err != nil {
		return schemas.MailResult{}, fmt.Errorf("transactional mailer: send %s: %w", r.ExternalID, err)
	}
	if out.refused != nil {
		return schemas.MailResult{RefusedCode: out.refused.Code, Refused: out.refused.Error}, nil
	}
	return schemas.MailResult{MessageID: out.answer.ID, Deduplicated: out.answer.Deduplicated, Status: out.answer.Status,
		Publish: out.publish}, nil
}
