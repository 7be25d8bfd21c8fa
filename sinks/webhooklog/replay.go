package webhooklog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"sendstream/schemas"
)

// Publisher publishes envelopes and returns once the broker acknowledged
// every one (pipeline.Publisher, the producer, satisfies it).
type Publisher interface {
	Publish(ctx context.Context, topic string, envs ...schemas.Envelope) error
}

// ReplayEnvelopes returns the webhook.delivery.v1 envelopes that deliver
// each logged message again: the same message id (so the same body `id`
// and webhook-id header), body, target and first time, Replay set, and the
// attempt number after the highest one published, which gives the
// envelope an id of its own (schemas.ChildID of the message and target,
// the type and that attempt), so the delivery stage takes it for a new
// attempt rather than a copy of one it made.
func ReplayEnvelopes(logged []Logged, now time.Time) ([]schemas.Envelope, error) {
	envs := make([]schemas.Envelope, 0, len(logged))
	for _, l := range logged {
		d := l.Delivery
		d.Attempt++
		d.Throttled = 0
		d.Replay = true
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // the body goes out byte for byte as it was logged
		if err := enc.Encode(d); err != nil {
			return nil, fmt.Errorf("replay %s to %s: %w", d.MessageID, d.TargetID, err)
		}
		envs = append(envs, schemas.Envelope{
			ID:         schemas.ChildID(d.MessageID+"/"+d.TargetID, schemas.TypeWebhookDelivery, d.Attempt),
			Workspace:  l.Workspace,
			Type:       schemas.TypeWebhookDelivery,
			Key:        schemas.WebhookDeliveryKey(l.Workspace, d.TargetID, d.MessageID),
			OccurredAt: now.UTC(),
			Payload:    bytes.TrimRight(buf.Bytes(), "\n"),
			// Compact as encoded, and sent as is: the envelope codec would
			// otherwise escape <, > and & in the body's strings.
			PayloadCompact: true,
		})
	}
	return envs, nil
}

// Replay publishes ReplayEnvelopes(logged) to TopicWebhookDeliveries through
// pub, in one call that returns once the broker has them all, and returns
// how many it published.
func Replay(ctx context.Context, pub Publisher, logged []Logged, now time.Time) (int, error) {
	envs, err := ReplayEnvelopes(logged, now)
	if err != nil || len(envs) == 0 {
		return 0, err
	}
	if err := pub.Publish(ctx, schemas.TopicWebhookDeliveries, envs...); err != nil {
		return 0, fmt.Errorf("replay %d webhook messages: %w", len(envs), err)
	}
	return len(envs), nil
}
