// Package schemastest holds test helpers over the schemas package: the
// webhooks section of the assembled OpenAPI document and a canonical JSON
// form for comparing schemas. Only tests import it.
package schemastest

import (
	"encoding/json"
	"testing"

	"sendstream/schemas"
)

// Webhook is one operation of the OpenAPI document's webhooks section:
// its description and the data schema of its JSON request body.
type Webhook struct {
	Description string
	Data        json.RawMessage
}

// OpenAPIWebhooks assembles the OpenAPI document (schemas.OpenAPI) and
// returns its webhooks section by event name; a failure fails t.
func OpenAPIWebhooks(t testing.TB) map[string]Webhook {
	t.Helper()
	raw, err := schemas.OpenAPI("http://127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Webhooks map[string]struct {
			Post struct {
				Description string `json:"description"`
				RequestBody struct {
					Content map[string]struct {
						Schema struct {
							Properties struct {
								Data json.RawMessage `json:"data"`
							} `json:"properties"`
						} `json:"schema"`
					} `json:"content"`
				} `json:"requestBody"`
			} `json:"post"`
		} `json:"webhooks"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]Webhook, len(doc.Webhooks))
	for name, op := range doc.Webhooks {
		out[name] = Webhook{Description: op.Post.Description,
			Data: op.Post.RequestBody.Content["application/json"].Schema.Properties.Data}
	}
	return out
}

// Canonical re-encodes JSON with sorted object keys, so that two
// encodings of one value compare equal; raw that is not JSON fails t.
func Canonical(t testing.TB, raw json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return string(b)
}
