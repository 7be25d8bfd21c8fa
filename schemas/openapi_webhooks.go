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

// webhookResponses are what a receiver's answers mean (spec 6), the same
// for every event type.
var webhookResponses = map[string]any{
	"2XX":     map[string]any{"description": "Received: any 2xx answered within 10 seconds, with a body of at most 64 KiB (the body is not used; send none), ends the delivery of this message to this target."},
	"410":     map[string]any{"description": "Gone: a REST hook is deleted; a dashboard endpoint is disabled (`admin webhook-endpoint enable` turns it on again). Nothing more is sent to it, and this message is not retried."},
	"429":     map[string]any{"description": "Too many requests: the message is sent again later without counting an attempt. A `Retry-After` (seconds or an HTTP date) is honoured, kept between the schedule's next wait and 10 hours; without one the schedule's next wait applies."},
	"default": map[string]any{"description": "Any other status (3xx included: redirects are not followed), no answer within 10 seconds, a connection or TLS error, or an answer body over 64 KiB is a failed attempt, retried on the schedule: three attempts 1 s then 2 s apart, then after 5 min, 30 min, 2 h, 5 h, 8 h, 8 h and 10 h (ten attempts over about 34 hours), then dropped. A dashboard endpoint whose failures began more than 12 hours before a failed attempt is disabled; REST hooks never are. Every attempt is in the delivery log (`admin webhook deliveries`), and `admin webhook replay` sends logged messages again with the same id."},
}

// deliveryNotes says, for every event type, who receives it and what the
// spec leaves open: members, order, repeats.
func deliveryNotes(name string) string {
	return "Delivered to REST hooks subscribed to " + name + " and to enabled dashboard endpoints listing it, as a POST with `Content-Type: application/json` and `User-Agent: Sendstream-Webhooks/1.0`; dashboard endpoints' deliveries are signed (Standard Webhooks headers and `X-Signature-256`), REST hooks' are not. " +
		"`data` carries the members listed here, no others; ignore members you do not know, as new ones may be added without a new event type. " +
		"Delivery is at least once (deduplicate on `id`) and not ordered: a retried message arrives after later ones and messages to one target may be sent concurrently, so order by `timestamp`."
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
				"id":        map[string]any{"type": "string", "description": "Message id: the id of the event behind the delivery, the same on every attempt and on a replay (and in the `webhook-id` header when the endpoint signs). Delivery is at least once: deduplicate on it."},
				"event":     map[string]any{"type": "string", "const": e.Name},
				"timestamp": map[string]any{"type": "string", "format": "date-time", "description": "When the event happened (ISO 8601, UTC, milliseconds), the same on every attempt and on a replay; not the time of this attempt (that is `webhook-timestamp`)."},
				"teamId":    map[string]any{"type": "string", "description": "The workspace the event belongs to."},
				"data":      data,
			},
		}
		out[e.Name] = map[string]any{"post": map[string]any{
			"operationId": "webhook_" + e.Name,
			"tags":        []any{"Webhooks"},
			"summary":     e.Name,
			"description": e.Description + "\n\n" + deliveryNotes(e.Name),
			"parameters":  webhookHeaders,
			"requestBody": map[string]any{"required": true, "content": map[string]any{
				"application/json": map[string]any{"schema": body}}},
			"responses": webhookResponses,
		}}
	}
	return out, nil
}
