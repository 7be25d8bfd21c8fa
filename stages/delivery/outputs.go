package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/webhook"
)

// This file builds what Handle returns for a recorded outcome: the
// transactional.status.v1 envelope (TopicMessageStatus, for the ClickHouse
// message log) and, for a sent message, TRANSACTIONAL_SENT, for a failed
// one TRANSACTIONAL_FAILED (TopicWebhooks), each only when a webhook
// target of the workspace wants it (the fan-out would drop it otherwise).
// Their ids derive from the message id and the status, so a redelivered
// envelope returns the same envelopes and every copy collapses downstream.

// route files outputs: status changes to TopicMessageStatus, webhook
// envelopes to TopicWebhooks.
func route(out schemas.Envelope) string {
	if out.Type == schemas.TypeTransactionalStatus {
		return schemas.TopicMessageStatus
	}
	return schemas.TopicWebhooks
}

// result is the recorded outcome of one message.
type result struct {
	status     string // schemas.MessageSent or MessageFailed
	reason     string // why it failed
	providerID string // the transport's id of a sent message
	subject    string // as rendered, when rendered
	rendered   bool   // false: it failed before its subject rendered
	refused    []string
	at         time.Time // when it was recorded
}

// hooks is which of the webhook events this stage publishes a workspace's
// webhook targets want.
type hooks struct{ sent, failed bool }

// The public names of the webhook events this stage publishes.
var (
	webhookSent  = schemas.TransactionalWebhookEvents[schemas.TypeWebhookTransactionalSent]
	webhookNames = []string{webhookSent, schemas.WebhookTransactionalFailed}
)

// lookup asks Postgres which of this stage's webhook events ws's targets
// want.
func (s *Stage) lookup(ctx context.Context, ws string) (hooks, error) {
	w, err := webhook.Wanted(ctx, s.pg, ws, webhookNames)
	if err != nil {
		return hooks{}, err
	}
	return hooks{sent: w[webhookSent], failed: w[schemas.WebhookTransactionalFailed]}, nil
}

// announce returns the envelopes announcing the recorded outcome r of the
// message of env and p, asking which webhook envelopes its workspace wants
// (cached for webhook.TargetTTL). A failed lookup is an error marked
// pipeline.Unavailable: the retry finds the message done and announces
// the recorded outcome again.
func (s *Stage) announce(ctx context.Context, env schemas.Envelope, p *schemas.SendPayload, r result) ([]schemas.Envelope, error) {
	w, err := s.wants.Get(ctx, env.Workspace, func(ctx context.Context) (hooks, error) {
		return s.lookup(ctx, env.Workspace)
	})
	if err != nil {
		return nil, pipeline.Unavailable(fmt.Errorf("delivery: outputs of %s: %w", p.MessageID, err))
	}
	return outputs(env, p, r, w)
}

// outputs returns the envelopes announcing r for the message of env and p:
// its status, and the webhook envelope of r when w says it is wanted.
// Their payloads are the schemas encoders' json.Marshal bytes (no raw JSON
// inside), so they are published without a second check (PayloadCompact).
func outputs(env schemas.Envelope, p *schemas.SendPayload, r result, w hooks) ([]schemas.Envelope, error) {
	at := r.at.UTC()
	ws := env.Workspace
	key := ws + ":" + p.MessageID
	provider := providerName(p.Policy.Provider)
	sp := schemas.StatusPayload{MessageID: p.MessageID, Status: r.status, At: at, To: p.To, ExternalID: p.ExternalID,
		TemplateID: p.TemplateID, PolicyID: p.Policy.ID, Provider: provider, Detail: r.reason}
	if r.status == schemas.MessageSent && len(r.refused) > 0 {
		sp.Detail = "refused copies: " + strings.Join(r.refused, ", ")
	}
	sb, err := schemas.AppendStatusPayload(make([]byte, 0, 256), &sp)
	if err != nil {
		return nil, fmt.Errorf("delivery: status of %s: %w", p.MessageID, err)
	}
	outs := []schemas.Envelope{{ID: schemas.ChildID(p.MessageID, schemas.TypeTransactionalStatus+"/"+r.status, 0),
		Workspace: ws, Type: schemas.TypeTransactionalStatus, Key: key, OccurredAt: at, CausationID: env.ID,
		Traceparent: env.Traceparent, Payload: sb, PayloadCompact: true}}
	if r.status == schemas.MessageSent && w.sent {
		hb, err := schemas.AppendMessageEventData(make([]byte, 0, 192), &schemas.MessageEventData{MessageID: p.MessageID,
			RFCMessageID: p.RFCMessageID, Email: p.To, ExternalID: p.ExternalID, Provider: provider, OccurredAt: at})
		if err != nil {
			return nil, fmt.Errorf("delivery: TRANSACTIONAL_SENT of %s: %w", p.MessageID, err)
		}
		outs = append(outs, schemas.Envelope{ID: schemas.ChildID(p.MessageID, schemas.TypeWebhookTransactionalSent, 0),
			Workspace: ws, Type: schemas.TypeWebhookTransactionalSent, Key: key, OccurredAt: at, CausationID: env.ID,
			Traceparent: env.Traceparent, Payload: hb, PayloadCompact: true})
	}
	if r.status == schemas.MessageFailed && w.failed {
		fb, err := json.Marshal(schemas.TransactionalFailedData{MessageID: p.MessageID, RFCMessageID: p.RFCMessageID,
			Email: p.To, ExternalID: p.ExternalID, Provider: provider, Reason: failureReason(r.reason), OccurredAt: at})
		if err != nil {
			return nil, fmt.Errorf("delivery: TRANSACTIONAL_FAILED of %s: %w", p.MessageID, err)
		}
		outs = append(outs, schemas.Envelope{ID: schemas.ChildID(p.MessageID, schemas.TypeWebhookTransactionalFailed, 0),
			Workspace: ws, Type: schemas.TypeWebhookTransactionalFailed, Key: key, OccurredAt: at, CausationID: env.ID,
			Traceparent: env.Traceparent, Payload: fb, PayloadCompact: true})
	}
	return outs, nil
}

// failureReason is the reason TRANSACTIONAL_FAILED carries: the recorded
// one, or a generic text for a failure recorded without one (the catalogue
// requires a reason).
func failureReason(reason string) string {
	if reason == "" {
		return "delivery failed"
	}
	return reason
}

// doneResult is the recorded outcome of a message claim found no longer
// queued, for the outputs of a redelivered envelope (its first handling
// may have recorded the outcome and stopped before the runner published):
// sent when it was sent, failed when delivery failed it, none (ok false)
// when nothing this stage announces happened.
func doneResult(c claim) (result, bool) {
	switch {
	case c.sentAt != nil:
		return result{status: schemas.MessageSent, at: *c.sentAt}, true
	case c.status == schemas.MessageFailed && c.failedAt != nil:
		return result{status: schemas.MessageFailed, reason: c.reason, at: *c.failedAt}, true
	}
	return result{}, false
}

// providerName is the provider a policy names ("smtp" when none).
func providerName(name string) string {
	if name == "" {
		return "smtp"
	}
	return name
}
