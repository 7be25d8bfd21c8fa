package contacts_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/deploy/stack"
	"sendstream/ingest/contacts"
	"sendstream/ingest/ingesttest"
	"sendstream/schemas"
)

// testSecret signs confirmation links in tests.
const testSecret = "test-secret-0123456789abcdef"

// env is one running server with the contacts routes.
type env struct {
	*ingesttest.Harness
	store  *contacts.Store
	pool   *pgxpool.Pool
	signer *contacts.Signer
}

func start(t *testing.T) *env { return startB(t) }

func startB(t testing.TB) *env {
	t.Helper()
	pool := stack.PG(t)
	store := contacts.NewStore(pool)
	t.Cleanup(store.Close)
	signer, err := contacts.NewSigner(testSecret, 0)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{store: store, pool: pool, signer: signer}
	// The site URL is known only once the harness listens: links in
	// confirmation emails carry this placeholder origin, and tests swap in
	// the harness URL before following them.
	routes := contacts.Routes(contacts.Deps{Store: store, Signer: signer, SiteURL: placeholderSite})
	e.Harness = ingesttest.Start(t, routes...)
	return e
}

// placeholderSite is the site URL the routes are built with.
const placeholderSite = "http://site.invalid"

// ws creates a workspace and returns its id and a full-access key.
func (e *env) ws(t *testing.T, o ingesttest.WorkspaceOpts) (string, string) {
	t.Helper()
	return e.NewWorkspace(t, o)
}

// call sends a request and decodes a JSON answer into out (when non-nil).
func (e *env) call(t *testing.T, method, path, key string, body any, out any) int {
	t.Helper()
	st, data := e.Do(method, path, key, body)
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, data, err)
		}
	}
	return st
}

// mustCall is call that fails the test on an unexpected status.
func (e *env) mustCall(t *testing.T, want int, method, path, key string, body any, out any) {
	t.Helper()
	st, data := e.Do(method, path, key, body)
	if st != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, st, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, data, err)
		}
	}
}

// errBody is the spec 7.1 error format.
type errBody struct {
	Error  string   `json:"error"`
	Code   string   `json:"code"`
	Fields []string `json:"fields"`
}

type upsertResp struct {
	Success bool             `json:"success"`
	Created bool             `json:"created"`
	ID      string           `json:"id"`
	Contact contacts.Contact `json:"contact"`
}

type pageResp struct {
	Contacts   []contacts.Contact `json:"contacts"`
	Pagination struct {
		Page       int64 `json:"page"`
		Limit      int   `json:"limit"`
		Total      int64 `json:"total"`
		TotalPages int64 `json:"totalPages"`
	} `json:"pagination"`
}

// events returns the envelopes of ws on the contacts and opt-in topics.
func (e *env) events(t *testing.T, ws string) []schemas.Envelope {
	t.Helper()
	return append(e.topicEvents(t, schemas.TopicContacts, ws), e.topicEvents(t, schemas.TopicOptIn, ws)...)
}

// topicEvents returns the envelopes of ws on topic.
func (e *env) topicEvents(t *testing.T, topic, ws string) []schemas.Envelope {
	t.Helper()
	var out []schemas.Envelope
	for _, env := range e.Consume(t, topic) {
		if env.Workspace == ws {
			out = append(out, env)
		}
	}
	return out
}

// ofType keeps the envelopes of one type.
func ofType(envs []schemas.Envelope, typ string) []schemas.Envelope {
	var out []schemas.Envelope
	for _, e := range envs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// count returns the rows of a query with one bigint result.
func (e *env) count(t *testing.T, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := e.pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// total is ws's maintained contact total (the limit counter).
func (e *env) total(t *testing.T, ws string) int64 {
	return e.count(t, "SELECT sum(n)::bigint FROM contact_buckets WHERE workspace_id = $1 AND status = '' AND bucket = -1", ws)
}

// contactsOf counts ws's contacts.
func (e *env) contactsOf(t *testing.T, ws string) int64 {
	return e.count(t, "SELECT count(*) FROM contacts WHERE workspace_id = $1", ws)
}

// list creates a list.
func (e *env) list(t *testing.T, ws, name string, doi bool) contacts.List {
	t.Helper()
	l, err := e.store.CreateList(context.Background(), ws, name, doi)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// field defines a custom field.
func (e *env) field(t testing.TB, ws, key, typ string) {
	t.Helper()
	if err := e.store.CreateCustomField(context.Background(), ws, key, typ); err != nil {
		t.Fatal(err)
	}
}

// raw sends a request with an explicit content type and body.
func (e *env) raw(t *testing.T, method, path, key, ctype string, body string, hdr map[string]string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, data := e.DoRequest(req)
	return resp.StatusCode, data
}

func waitFor(t *testing.T, what string, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
