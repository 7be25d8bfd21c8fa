package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"sendstream/deploy/stack"
	"sendstream/ingest/ingesttest"
	"sendstream/ingest/oauth"
	"sendstream/pipeline"
	"sendstream/schemas"
)

// The bad-input suite (badinput_test.go) needs, for each operation of the
// OpenAPI document, one request that the service accepts: the document
// says which fields exist and their limits, but not which ids exist, which
// custom fields the workspace defines or which alternatives exclude each
// other. This file holds that knowledge: the suite's workspace and the base
// request of every operation. An operation of the document without a base
// here fails the suite, so a new endpoint cannot go untested.

// biEnv is the suite's server and workspace.
type biEnv struct {
	h      *ingesttest.Harness
	ws     string
	key    string
	run    string // unique per run, part of every marker
	listID string
	// member is an address on the list (unsubscribe, search); messageID a
	// message of the workspace (status lookups, provider reports).
	member    string
	memberID  string
	messageID string
	template  string
	secret    string // the server's: signs confirmation and unsubscribe links
	tracking  string // a tracking token
}

// baseReq is one accepted request of an operation.
type baseReq struct {
	path  map[string]string // path parameter values
	query [][2]string       // query parameters, unencoded
	body  map[string]any    // JSON body; nil for none
	// raw and header, when raw is set, are the body of the base request
	// of an operation with custom inputs (a form post).
	raw    []byte
	header [][2]string
	// refused marks a base the service refuses by design (an unsigned SNS
	// message): every input is then only checked for a 4xx.
	refused bool
	// alone lists, per field, the fields to drop before changing it: the
	// alternatives the document says exclude each other or take precedence.
	alone map[string][]string
}

// biBases returns the base request of each operationId; marker is unique
// per input and goes where the service stores it (an address, an
// externalId), so what a refused input stored can be named.
func biBases(e *biEnv) map[string]func(marker string) baseReq {
	email := func(m string) string { return m + "@example.com" }
	profile := func(m string) map[string]any {
		return map[string]any{
			"email": email(m), "firstName": "Ann", "country": "DE", "language": "de", "source": "api",
			"customFields": map[string]any{"plan": "pro", "age": 42, "vip": true, "since": "2024-01-02"},
			"metadata":     map[string]any{"k": "v", "n": 1},
		}
	}
	event := func(m string) map[string]any {
		return map[string]any{
			"event": "signup", "email": email(m), "externalId": m, "goalType": "purchase", "value": 12.5,
			"currency": "EUR", "occurredAt": "2024-05-01T10:00:00Z", "properties": map[string]any{"plan": "pro", "n": 2},
		}
	}
	send := func(m string) baseReq {
		return baseReq{body: map[string]any{
			"to": email(m), "subject": "Hi {{ data.name }}", "htmlContent": "<p>Hello {{ name }}</p>",
			"data": map[string]any{"name": "Ann", "order": map[string]any{
				"id": "A1", "total": "9.50", "items": []any{map[string]any{"name": "Tea", "qty": 1, "price": "9.50"}}}},
			"externalId": m, "strict": false, "language": "de", "sendPolicy": "transactional",
			"contact":     map[string]any{"firstName": "Ann", "country": "DE", "language": "de", "customFields": map[string]any{"plan": "pro"}},
			"attachments": []any{map[string]any{"filename": "a.txt", "content": "aGVsbG8=", "contentType": "text/plain"}},
			"cc":          []any{"cc-" + email(m)}, "bcc": "bcc-" + email(m), "replyTo": "reply@example.com", "fromEmail": "hello@example.com",
		}, alone: map[string][]string{"templateId": {"htmlContent"}}}
	}
	none := func(string) baseReq { return baseReq{} }
	// OAuth (form posts): one confidential app of the suite's enterprise
	// workspace, authenticated with HTTP Basic in place of the API key.
	var oauthBasic string
	oauthForm := func(body string) baseReq {
		if oauthBasic == "" {
			app, secret, err := oauth.NewStore(e.h.PG).CreateApp(context.Background(), oauth.NewApp{Workspace: e.ws, Name: "suite",
				Type: oauth.TypeConfidential, Grants: []string{oauth.GrantClientCredentials}, Scopes: []string{"contacts:read"}})
			if err != nil {
				panic(err)
			}
			oauthBasic = "Basic " + base64.StdEncoding.EncodeToString([]byte(app.ClientID+":"+secret))
		}
		return baseReq{raw: []byte(body), header: [][2]string{{"Content-Type", "application/x-www-form-urlencoded"}, {"Authorization", oauthBasic}}}
	}
	return map[string]func(string) baseReq{
		"getMe":      none,
		"getOpenAPI": none,
		"listLists":  none,
		"listContacts": func(string) baseReq {
			return baseReq{query: [][2]string{{"page", "1"}, {"limit", "10"}, {"status", "ACTIVE"}, {"listId", e.listID}}}
		},
		"searchContact": func(string) baseReq { return baseReq{query: [][2]string{{"email", e.member}}} },
		"upsertContact": func(m string) baseReq { return baseReq{body: profile(m)} },
		"subscribeToList": func(m string) baseReq {
			return baseReq{path: map[string]string{"id": e.listID}, body: profile(m), alone: map[string][]string{"contactId": {"email"}}}
		},
		"unsubscribeFromList": func(m string) baseReq {
			return baseReq{path: map[string]string{"id": e.listID}, body: map[string]any{"email": email(m)},
				alone: map[string][]string{"contactId": {"email"}}}
		},
		"recordEvent":       func(m string) baseReq { return baseReq{body: event(m)} },
		"recordPublicEvent": func(m string) baseReq { return baseReq{body: event(m)} },
		"importEvents": func(m string) baseReq {
			return baseReq{body: map[string]any{"events": []any{event(m)}}}
		},
		"sendTransactional":     send,
		"validateTransactional": send,
		"listTransactional": func(string) baseReq {
			return baseReq{query: [][2]string{{"to", e.member}, {"status", "queued"}, {"externalId", "x"}, {"limit", "10"}, {"before", e.messageID}}}
		},
		"getTransactionalStatus": func(string) baseReq { return baseReq{path: map[string]string{"messageId": e.messageID}} },
		"providerReports": func(m string) baseReq {
			return baseReq{body: map[string]any{"reports": []any{map[string]any{
				"type": "delivered", "messageId": e.messageID, "email": e.member, "bounceType": "soft", "reason": "r",
				"complaintType": "abuse", "occurredAt": "2024-05-01T10:00:00Z", "provider": "suite",
			}}}}
		},
		// REST hooks: subscribing again answers 200 with the existing
		// subscription, so one fixed URL stores one row however many inputs run.
		"subscribeWebhook": func(string) baseReq {
			return baseReq{body: map[string]any{"event": "CONTACT_CREATED", "targetUrl": "https://8.8.8.8/hooks/suite"}}
		},
		// Each input deletes a subscription of its own, stored directly
		// (the API's rate limit of 60 a minute would stop the suite).
		"deleteWebhook": func(m string) baseReq {
			id := schemas.NewID()
			if _, err := e.h.PG.Exec(context.Background(),
				`INSERT INTO webhook_subscriptions (id, workspace_id, event, target_url) VALUES ($1, $2, 'EMAIL_BOUNCED', $3)`,
				id, e.ws, "https://8.8.8.8/hooks/"+m); err != nil {
				panic(err)
			}
			return baseReq{path: map[string]string{"id": id}}
		},
		"listWebhookEvents": none,
		// Sent without X-Trigger-Key, so refused with 401: the inputs check
		// only that nothing breaks before the trigger key is looked at
		// (ingest/journeys' tests cover the body with a key).
		"triggerJourney": func(m string) baseReq {
			return baseReq{refused: true, body: map[string]any{"email": email(m), "data": map[string]any{"plan": "pro", "n": 2}}}
		},
		// Unsigned, so refused: the inputs check only that nothing breaks
		// before the signature check. The certificate URL is on no SNS host,
		// so nothing is fetched.
		"providerSES": func(m string) baseReq {
			return baseReq{refused: true, body: map[string]any{
				"Type": "Notification", "MessageId": m, "TopicArn": "arn:aws:sns:us-east-1:123456789012:t",
				"Message": "{}", "Timestamp": "2024-05-01T10:00:00.000Z", "SignatureVersion": "1",
				"Signature": "c2ln", "SigningCertURL": "https://example.invalid/cert.pem",
			}}
		},
		"oauthToken":  func(string) baseReq { return oauthForm("grant_type=client_credentials&scope=contacts%3Aread") },
		"oauthRevoke": func(string) baseReq { return oauthForm("token=ss_oauth_unknown") },
	}
}

// newBIEnv starts a server with every feature's routes against the local
// stack and a broker, and creates the suite's workspace with the operator
// commands: enterprise, with a rate multiplier high enough that no input is
// answered 429; a list, custom fields of each type, a sending domain, a
// stored template, a marketing policy; then one member of the list and one
// message through the API.
func newBIEnv(t *testing.T) *biEnv {
	t.Helper()
	pg := stack.PG(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := Config{SiteURL: "http://127.0.0.1:8080", Secret: schemas.NewID() + schemas.NewID()}
	h := ingesttest.Start(t, featureRoutes(t.Context(), cfg, pipeline.Resources{Postgres: pg, Logger: logger}, nil).routes...)
	e := &biEnv{h: h, run: schemas.NewID()[:8], secret: cfg.Secret}
	w := mustAdmin(t, "workspace", "create", "--name", "Bad input suite "+e.run, "--plan", "enterprise", "--rate-multiplier", "100000")
	e.ws, e.key = w["workspaceId"].(string), w["apiKey"].(string)
	e.listID = mustAdmin(t, "list", "create", "--workspace", e.ws, "--name", "Suite")["id"].(string)
	for key, typ := range map[string]string{"plan": "string", "age": "number", "vip": "boolean", "since": "date"} {
		mustAdmin(t, "custom-field", "create", "--workspace", e.ws, "--key", key, "--type", typ)
	}
	mustAdmin(t, "domain", "add", "--workspace", e.ws, "--domain", "example.com")
	e.template = mustAdmin(t, "template", "create", "--workspace", e.ws, "--file", filepath.Join("deploy", "examples", "template.json"))["id"].(string)
	mustAdmin(t, "send-policy", "create", "--workspace", e.ws, "--key", "news", "--kind", "marketing", "--from-email", "news@example.com")
	e.tracking = mustAdmin(t, "tracking-token", "create", "--workspace", e.ws)["token"].(string)

	e.member = "member-" + e.run + "@example.com"
	st, body := e.call(t, "POST", "/api/v1/lists/"+e.listID+"/subscribe", map[string]any{"email": e.member})
	var sub struct{ ContactID string }
	if st != 200 && st != 201 || json.Unmarshal(body, &sub) != nil {
		t.Fatalf("subscribe the member: %d %s", st, body)
	}
	e.memberID = sub.ContactID
	st, body = e.call(t, "POST", "/api/v1/transactional/send", map[string]any{
		"to": e.member, "subject": "Hi", "htmlContent": "<p>Hi</p>", "externalId": "status-" + e.run})
	var msg struct{ ID string }
	if st != 201 || json.Unmarshal(body, &msg) != nil || msg.ID == "" {
		t.Fatalf("send the status message: %d %s", st, body)
	}
	e.messageID = msg.ID
	return e
}

// call sends one JSON request with the suite's key.
func (e *biEnv) call(t *testing.T, method, path string, body any) (int, []byte) {
	t.Helper()
	return e.h.Do(method, path, e.key, body)
}

// snapshot is what the workspace holds: row counts and last changes in
// Postgres, and the envelopes published for it (request-log records aside,
// which every answered call publishes).
type snapshot struct {
	rows      string
	envelopes map[string]schemas.Envelope // by topic and id
}

const snapshotSQL = `SELECT
 (SELECT count(*) || '/' || coalesce(max(updated_at)::text, '-') FROM contacts WHERE workspace_id = $1),
 (SELECT count(*) || '/' || coalesce(max(updated_at)::text, '-') FROM memberships WHERE workspace_id = $1),
 (SELECT count(*) FROM event_claims WHERE workspace_id = $1),
 (SELECT count(*) || '/' || coalesce(max(updated_at)::text, '-') FROM transactional_messages WHERE workspace_id = $1),
 (SELECT count(*) FROM suppressions WHERE workspace_id = $1),
 (SELECT count(*) FROM webhook_subscriptions WHERE workspace_id = $1)`

func (e *biEnv) snapshot(t *testing.T) snapshot {
	t.Helper()
	var c, m, ev, tx, sup, wh string
	if err := e.h.PG.QueryRow(context.Background(), snapshotSQL, e.ws).Scan(&c, &m, &ev, &tx, &sup, &wh); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	s := snapshot{
		rows:      fmt.Sprintf("contacts %s, memberships %s, event claims %s, messages %s, suppressions %s, webhook subscriptions %s", c, m, ev, tx, sup, wh),
		envelopes: map[string]schemas.Envelope{},
	}
	for _, topic := range schemas.AllTopics {
		if topic == schemas.TopicRequestLog {
			continue
		}
		for _, env := range e.h.Consume(t, topic) {
			if env.Workspace == e.ws {
				s.envelopes[topic+" "+env.ID] = env
			}
		}
	}
	return s
}

// changes describes what after holds that s does not, naming the inputs
// whose marker the new envelopes carry.
func (s snapshot) changes(after snapshot, markers map[string]string) []string {
	var out []string
	if s.rows != after.rows {
		out = append(out, "Postgres changed: before "+s.rows+"; after "+after.rows)
	}
	for k, env := range after.envelopes {
		if _, ok := s.envelopes[k]; ok {
			continue
		}
		who := "no input's marker"
		for m, label := range markers {
			if strings.Contains(string(env.Payload), m) {
				who = label
				break
			}
		}
		out = append(out, fmt.Sprintf("published %s on %s (%s)", env.Type, strings.Fields(k)[0], who))
	}
	return out
}

const storedSQL = `SELECT email FROM contacts WHERE workspace_id = $1 AND email = ANY($2)
UNION ALL SELECT external_id FROM transactional_messages WHERE workspace_id = $1 AND external_id = ANY($3)
UNION ALL SELECT event_id::text FROM event_claims WHERE workspace_id = $1 AND event_id::text = ANY($4)`

// stored returns the markers (of those given) that something in the
// workspace carries: a contact's address, a message's or an event's
// externalId, or a payload published since the snapshot before.
func (e *biEnv) stored(t *testing.T, before, after snapshot, markers []string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	if len(markers) == 0 {
		return out
	}
	var emails, events []string
	byKey := map[string]string{}
	for _, m := range markers {
		emails = append(emails, m+"@example.com")
		byKey[m+"@example.com"] = m
		byKey[m] = m
		id := schemas.IDFromKey(e.ws, schemas.EventIDScope, m)
		if len(id) == 32 {
			id = id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:]
		}
		events = append(events, id)
		byKey[id] = m
	}
	rows, err := e.h.PG.Query(context.Background(), storedSQL, e.ws, emails, markers, events)
	if err != nil {
		t.Fatalf("stored: %v", err)
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatalf("stored: %v", err)
		}
		out[byKey[k]] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("stored: %v", err)
	}
	for k, env := range after.envelopes {
		if _, ok := before.envelopes[k]; ok {
			continue
		}
		for _, m := range markers {
			// A marker followed by a digit is another marker's prefix.
			for rest := string(env.Payload); ; {
				i := strings.Index(rest, m)
				if i < 0 {
					break
				}
				rest = rest[i+len(m):]
				if rest == "" || rest[0] < '0' || rest[0] > '9' {
					out[m] = true
					break
				}
			}
		}
	}
	return out
}

// healthz answers whether /healthz still says 200.
func (e *biEnv) healthz(client *http.Client) error {
	resp, err := client.Get(e.h.URL + "/healthz")
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("/healthz answered %d", resp.StatusCode)
	}
	return nil
}
