package schemas

import (
	"encoding/json"
)

// webhookHeaders are the request headers of every delivery (spec 6), as
// OpenAPI header parameters of the `webhooks` operations.
var webhookHeaders = []any{
	whHeader("X-Webhook-Event", true, "The event type name, as in the body's `event`."),
	whHeader("X-Webhook-Attempt", true, "The attempt number, 1 for the first delivery attempt of this message."),
	whHeader("webhook-id", false, "Standard Webhooks message id: the body's `id`, the same across retries and replays; use it to deduplicate. Sent when the endpoint has a secret."),
	whHeader("webhook-timestamp", false, "Standard Webhooks timestamp: Unix seconds of this attempt. Reject values more than 300 seconds from your clock. Sent when the endpoint has a secret."),
	whHeader("webhook-signature", false, "Standard Webhooks signature: `v1,` followed by the base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<raw body>`. The key is the base64-decoded part after `whsec_` of the secret, or the secret's UTF-8 bytes when it has no such prefix. During the 24 hours after a secret rotation several space-separated signatures are sent, one per valid secret; accept the message when any one matches (compare in constant time). Sent when the endpoint has a secret."),
	whHeader("X-Signature-256", false, "Legacy signature: `sha256=` followed by the lower-case hex HMAC-SHA256 of the raw body with the same key (the current secret only). Sent when the endpoint has a secret."),
}

func whHeader(name string, required bool, desc string) map[string]any {
	return map[string]any{"name": name, "in": "header", "required": required, "description": desc,
		"schema": map[string]any{"type": "string"}}
}

// webhooksSection returns the OpenAPI 3.1 `webhooks` object: one POST
// operation per registered event type, whose request body is the delivery
// body of spec 2.6 with that type's `data` schema.
func webhooksSection() (map[string]any, error) {
	out := map[string]any{}
	for _, e := range WebhookEvents() {
		var data any
		if err := json.Unmarshal(e.Data, &data); err != nil {
			return nil, err
		}
		body := map[string]any{
			"type":     "object",
			"required": []any{"id", "event", "timestamp", "teamId", "data"},
			"properties": map[string]any{
				"id":        map[string]any{"type": "string", "description": "Message id; the same across retries and replays (also the webhook-id header)."},
				"event":     map[string]any{"type": "string", "const": e.Name},
				"timestamp": map[string]any{"type": "string", "format": "date-time", "description": "When the delivery message was created (ISO 8601, UTC)."},
				"teamId":    map[string]any{"type": "string", "description": "The workspace."},
				"data":      data,
			},
		}
		out[e.Name] = map[string]any{"post": map[string]any{
			"operationId": "webhook_" + e.Name,
			"tags":        []any{"Webhooks"},
			"summary":     e.Name,
			"description": e.Description + "\n\nDelivered to REST hooks subscribed to " + e.Name + " and to dashboard endpoints listing it, with `Content-Type: application/json` and a `User-Agent` naming Sendstream.",
			"parameters":  webhookHeaders,
			"requestBody": map[string]any{"required": true, "content": map[string]any{
				"application/json": map[string]any{"schema": body}}},
			"responses": map[string]any{
				"2XX": map[string]any{"description": "Received. Any 2xx answered within 10 seconds ends the delivery; redirects are not followed. 410 Gone deletes a REST hook and retires a dashboard endpoint; 429 reschedules the delivery without counting an attempt; any other answer, a time-out or a connection error is retried: three attempts 1 s then 2 s apart, then after 5 min, 30 min, 2 h, 5 h, 8 h, 8 h and 10 h (ten attempts over about 34 hours)."},
			},
		}}
	}
	return out, nil
}
