package webhooks_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/deploy/admincli"
	"sendstream/deploy/stack"
	"sendstream/ingest/auth"
	"sendstream/ingest/webhooks"
	pgsink "sendstream/sinks/postgres"
	"sendstream/sinks/webhook"
)

// testServerSecret stands for SENDSTREAM_SECRET in these tests.
const testServerSecret = "endpoint-test-server-secret-0123456789"

// publicURL is an https URL on a public IP literal: no DNS lookup, and the
// guard lets it through.
const publicURL = "https://93.184.216.34/hooks"

// cli runs the webhook-endpoint commands through admincli.Run, as
// `sendstream admin` does, against the real Postgres.
type cli struct {
	t     *testing.T
	pgURL string
	pg    *pgxpool.Pool
	set   webhooks.AdminSettings
	now   time.Time
}

func newCLI(t *testing.T) *cli {
	t.Helper()
	c := &cli{t: t, pgURL: stack.ForTest(t).PostgresURL, pg: stack.PG(t), now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	c.set = webhooks.AdminSettings{Secret: testServerSecret, Now: func() time.Time { return c.now }}
	return c
}

// run runs `admin args...`: the decoded JSON object, or the error Run
// returned (main prints it to stderr and exits non-zero).
func (c *cli) run(args ...string) (map[string]any, error) {
	c.t.Helper()
	env := admincli.NewEnv(func(ctx context.Context) (*pgxpool.Pool, error) {
		pg, err := pgsink.Open(ctx, c.pgURL)
		if err != nil {
			return nil, err
		}
		return pg, pgsink.Migrate(ctx, pg)
	}, func(context.Context) (driver.Conn, error) {
		return nil, errors.New("the webhook-endpoint commands never need ClickHouse")
	})
	cmds := webhooks.AdminCommands(func() (webhooks.AdminSettings, error) { return c.set, nil })
	var out, errOut bytes.Buffer
	if err := admincli.Run(context.Background(), cmds, env, args, &out, &errOut); err != nil {
		if out.Len() != 0 {
			c.t.Fatalf("admin %v failed but printed %s", args, out.String())
		}
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil || strings.Count(strings.TrimSpace(out.String()), "\n") != 0 {
		c.t.Fatalf("admin %v: stdout is not one JSON object: %q", args, out.String())
	}
	return m, nil
}

func (c *cli) must(args ...string) map[string]any {
	c.t.Helper()
	m, err := c.run(args...)
	if err != nil {
		c.t.Fatalf("admin %v: %v", args, err)
	}
	return m
}

// workspace creates a workspace and returns its id.
func (c *cli) workspace(name string) string {
	c.t.Helper()
	ws, _, err := auth.NewStore(c.pg).CreateWorkspace(context.Background(), auth.NewWorkspace{Name: name})
	if err != nil {
		c.t.Fatal(err)
	}
	return ws
}

// store is the store the delivery stage would open, with the same server
// secret.
func (c *cli) store() *webhook.EndpointStore {
	c.t.Helper()
	s, err := webhook.NewEndpointStore(c.pg, webhook.EndpointStoreConfig{Secret: testServerSecret})
	if err != nil {
		c.t.Fatal(err)
	}
	return s
}

// rows counts the endpoint rows of ws.
func (c *cli) rows(ws string) int {
	c.t.Helper()
	var n int
	if err := c.pg.QueryRow(context.Background(), "SELECT count(*) FROM webhook_endpoints WHERE workspace_id = $1", ws).Scan(&n); err != nil {
		c.t.Fatal(err)
	}
	return n
}

func (c *cli) create(ws string, extra ...string) (id, secret string) {
	c.t.Helper()
	m := c.must(append([]string{"webhook-endpoint", "create", "--workspace", ws, "--url", publicURL, "--events", "CONTACT_CREATED,EMAIL_BOUNCED"}, extra...)...)
	id, _ = m["id"].(string)
	secret, _ = m["secret"].(string)
	if id == "" || secret == "" || len(m) != 2 {
		c.t.Fatalf("create: %v", m)
	}
	c.now = c.now.Add(time.Second) // the list is in creation order
	return id, secret
}

func (c *cli) secrets(ws, id string, at time.Time) []string {
	c.t.Helper()
	s, err := c.store().Secrets(context.Background(), ws, id, at)
	if err != nil {
		c.t.Fatalf("secrets of %s: %v", id, err)
	}
	return s
}

// TestEndpointCreateListAndEncryptedSecrets: create generates a whsec_
// secret of 24 random bytes or keeps a given one, shows it once, stores it
// encrypted (neither it nor its key bytes are in the row) under a key only
// the same server secret opens; list never shows a secret.
func TestEndpointCreateListAndEncryptedSecrets(t *testing.T) {
	c := newCLI(t)
	ws := c.workspace("endpoints create")
	start := c.now
	id1, gen := c.create(ws)
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(gen, "whsec_"))
	if !strings.HasPrefix(gen, "whsec_") || err != nil || len(key) != 24 {
		t.Fatalf("generated secret %q: %d bytes, %v", gen, len(key), err)
	}
	if _, again := c.create(ws); again == gen {
		t.Fatal("two endpoints got the same generated secret")
	}
	const given = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	id3, got := c.create(ws, "--secret", given)
	if got != given {
		t.Fatalf("given secret answered as %q", got)
	}

	var raw []byte
	if err := c.pg.QueryRow(context.Background(), "SELECT secret_enc FROM webhook_endpoints WHERE id = $1", id3).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	givenKey, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(given, "whsec_"))
	if bytes.Contains(raw, []byte(given)) || bytes.Contains(raw, []byte(strings.TrimPrefix(given, "whsec_"))) || bytes.Contains(raw, givenKey) {
		t.Fatalf("the stored secret is in the clear: %x", raw)
	}
	if s := c.secrets(ws, id3, c.now); len(s) != 1 || s[0] != given {
		t.Fatalf("secrets of %s: %q", id3, s)
	}
	if s := c.secrets(ws, id1, c.now); len(s) != 1 || s[0] != gen {
		t.Fatalf("secrets of %s: %q", id1, s)
	}
	other, err := webhook.NewEndpointStore(c.pg, webhook.EndpointStoreConfig{Secret: "another-server-secret-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := other.Secrets(context.Background(), ws, id3, c.now); err == nil {
		t.Fatalf("another server secret opened the endpoint secret: %q", s)
	}
	// A sealed secret moved into another endpoint's row does not open.
	if _, err := c.pg.Exec(context.Background(), "UPDATE webhook_endpoints SET secret_enc = $1 WHERE id = $2", raw, id1); err != nil {
		t.Fatal(err)
	}
	if s, err := c.store().Secrets(context.Background(), ws, id1, c.now); err == nil {
		t.Fatalf("a secret copied from another endpoint opened: %q", s)
	}

	var out bytes.Buffer
	env := admincli.NewEnv(func(ctx context.Context) (*pgxpool.Pool, error) { return pgsink.Open(ctx, c.pgURL) }, nil)
	cmds := webhooks.AdminCommands(func() (webhooks.AdminSettings, error) { return c.set, nil })
	if err := admincli.Run(context.Background(), cmds, env, []string{"webhook-endpoint", "list", "--workspace", ws}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "whsec_") || strings.Contains(out.String(), strings.TrimPrefix(given, "whsec_")) || strings.Contains(strings.ToLower(out.String()), "secret\"") {
		t.Fatalf("list shows a secret: %s", out.String())
	}
	var list struct {
		Endpoints []webhook.Endpoint `json:"endpoints"`
	}
	if err := json.Unmarshal(out.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Endpoints) != 3 || list.Endpoints[0].ID != id1 || list.Endpoints[2].ID != id3 {
		t.Fatalf("list: %s", out.String())
	}
	e := list.Endpoints[0]
	if e.URL != publicURL || strings.Join(e.Events, ",") != "CONTACT_CREATED,EMAIL_BOUNCED" || !e.Enabled || !e.CreatedAt.Equal(start) {
		t.Fatalf("listed endpoint: %+v", e)
	}
	if m := c.must("webhook-endpoint", "list", "--workspace", c.workspace("empty")); string(mustJSON(t, m)) != `{"endpoints":[]}` {
		t.Fatalf("empty list: %v", m)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEndpointCreateRefusals: every refusal is an error naming the
// problem (non-zero exit) and stores nothing; private and http:// targets
// are refused, the allowed ranges let a private https target through.
func TestEndpointCreateRefusals(t *testing.T) {
	c := newCLI(t)
	ws := c.workspace("endpoints refusals")
	create := func(url, events string, extra ...string) error {
		args := []string{"webhook-endpoint", "create", "--workspace", ws}
		if url != "" {
			args = append(args, "--url", url)
		}
		if events != "" {
			args = append(args, "--events", events)
		}
		_, err := c.run(append(args, extra...)...)
		return err
	}
	for _, tc := range []struct {
		name, url, events string
		extra             []string
		want              string
	}{
		{"http", "http://93.184.216.34/hooks", "CONTACT_CREATED", nil, "absolute https URL"},
		{"not a url", "hooks", "CONTACT_CREATED", nil, "absolute https URL"},
		{"credentials", "https://u:p@93.184.216.34/", "CONTACT_CREATED", nil, "user name or password"},
		{"loopback", "https://127.0.0.1/hooks", "CONTACT_CREATED", nil, "private or internal"},
		{"rfc1918", "https://10.1.2.3/hooks", "CONTACT_CREATED", nil, "private or internal"},
		{"metadata", "https://169.254.169.254/latest", "CONTACT_CREATED", nil, "private or internal"},
		{"cgnat", "https://100.64.0.1/", "CONTACT_CREATED", nil, "private or internal"},
		{"ipv6 loopback", "https://[::1]/", "CONTACT_CREATED", nil, "private or internal"},
		{"mapped", "https://[::ffff:127.0.0.1]/", "CONTACT_CREATED", nil, "private or internal"},
		{"decimal", "https://2130706433/", "CONTACT_CREATED", nil, "private"},
		{"hex", "https://0x7f.1/", "CONTACT_CREATED", nil, "private"},
		{"localhost", "https://localhost./", "CONTACT_CREATED", nil, "local host"},
		{"unknown event", publicURL, "CONTACT_CREATED,NOPE_HAPPENED", nil, `unknown event type "NOPE_HAPPENED"`},
		{"no events", publicURL, ", ,", nil, "at least one event type"},
		{"short secret", publicURL, "CONTACT_CREATED", []string{"--secret", "short"}, "--secret"},
		{"bad whsec", publicURL, "CONTACT_CREATED", []string{"--secret", "whsec_!!"}, "--secret"},
		{"missing url", "", "CONTACT_CREATED", nil, "--url is required"},
		{"missing events", publicURL, "", nil, "--events is required"},
	} {
		err := create(tc.url, tc.events, tc.extra...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "admin webhook-endpoint create: ") {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := c.run("webhook-endpoint", "create", "--workspace", "no-such-workspace", "--url", publicURL, "--events", "CONTACT_CREATED"); err == nil || !strings.Contains(err.Error(), "workspace no-such-workspace does not exist") {
		t.Errorf("unknown workspace: %v", err)
	}
	if n := c.rows(ws); n != 0 {
		t.Fatalf("refused creates stored %d endpoints", n)
	}

	// SENDSTREAM_WEBHOOK_ALLOW_PRIVATE=127.0.0.0/8 lets https://127.0.0.1
	// through, never http://, and no other private range.
	c.set.AllowPrivate = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	id, _ := c.create(ws, "--url", "https://127.0.0.1:8443/hooks")
	if err := create("http://127.0.0.1:8443/hooks", "CONTACT_CREATED"); err == nil {
		t.Error("allowed range: http:// accepted")
	}
	if err := create("https://10.1.2.3/hooks", "CONTACT_CREATED"); err == nil {
		t.Error("allowed range 127.0.0.0/8 let 10.1.2.3 through")
	}
	eps, err := c.store().List(context.Background(), ws)
	if err != nil || len(eps) != 1 || eps[0].ID != id || eps[0].URL != "https://127.0.0.1:8443/hooks" {
		t.Fatalf("allowed private endpoint: %+v %v", eps, err)
	}
}

// TestEndpointEnableDisableDelete: the fan-out's EndpointsFor returns only
// enabled endpoints that want the event; disable, enable and delete answer
// {"id",…}; an unknown id and a second delete fail.
func TestEndpointEnableDisableDelete(t *testing.T) {
	c := newCLI(t)
	ws := c.workspace("endpoints lifecycle")
	id, secret := c.create(ws)
	ctx := context.Background()
	s := c.store()
	wanting := func(event string) []string {
		t.Helper()
		eps, err := s.EndpointsFor(ctx, ws, event)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range eps {
			ids = append(ids, e.ID)
		}
		return ids
	}
	if got := wanting("EMAIL_BOUNCED"); len(got) != 1 || got[0] != id {
		t.Fatalf("EndpointsFor EMAIL_BOUNCED: %v", got)
	}
	if got := wanting("CONTACT_UPDATED"); len(got) != 0 {
		t.Fatalf("EndpointsFor an event not asked for: %v", got)
	}
	hooks, err := s.Matching(ctx, ws, "EMAIL_BOUNCED")
	if err != nil || len(hooks) != 1 || hooks[0].ID != id || hooks[0].URL != publicURL || hooks[0].Kind != s.Kind() || hooks[0].Secrets != nil {
		t.Fatalf("Matching (the fan-out's source, no secrets): %+v %v", hooks, err)
	}
	if h, ok, err := s.Lookup(ctx, ws, id); err != nil || !ok || h.URL != publicURL || len(h.Secrets) != 1 || h.Secrets[0] != secret {
		t.Fatalf("Lookup of an enabled endpoint: %+v %v %v", h, ok, err)
	}
	if _, err := s.MarkFailing(ctx, ws, id, c.now); err != nil {
		t.Fatal(err)
	}

	m := c.must("webhook-endpoint", "disable", "--workspace", ws, "--id", id)
	if m["id"] != id || m["enabled"] != false || m["disabledReason"] != webhook.DisabledByOperator || m["disabledAt"] == nil {
		t.Fatalf("disable: %v", m)
	}
	if got := wanting("EMAIL_BOUNCED"); len(got) != 0 {
		t.Fatalf("EndpointsFor returns a disabled endpoint: %v", got)
	}
	if _, ok, err := s.Lookup(ctx, ws, id); ok || err != nil {
		t.Fatalf("Lookup of a disabled endpoint: ok %v %v", ok, err)
	}
	m = c.must("webhook-endpoint", "enable", "--workspace", ws, "--id", id)
	if m["id"] != id || m["enabled"] != true || m["disabledReason"] != nil || m["disabledAt"] != nil || m["failingSince"] != nil {
		t.Fatalf("enable: %v", m)
	}
	if got := wanting("CONTACT_CREATED"); len(got) != 1 || got[0] != id {
		t.Fatalf("EndpointsFor after enable: %v", got)
	}
	// 410 Gone: Retire disables the endpoint until an operator enables it.
	if err := s.Retire(ctx, ws, id); err != nil {
		t.Fatal(err)
	}
	if m := c.must("webhook-endpoint", "list", "--workspace", ws); m["endpoints"].([]any)[0].(map[string]any)["disabledReason"] != webhook.DisabledGone {
		t.Fatalf("after Retire: %v", m)
	}
	if err := s.Retire(ctx, ws, "no-such-endpoint"); err != nil {
		t.Fatalf("Retire of an unknown endpoint: %v", err)
	}
	m = c.must("webhook-endpoint", "delete", "--workspace", ws, "--id", id)
	if m["id"] != id || m["deleted"] != true {
		t.Fatalf("delete: %v", m)
	}
	for _, verb := range []string{"delete", "enable", "disable", "rotate-secret"} {
		if _, err := c.run("webhook-endpoint", verb, "--workspace", ws, "--id", id); err == nil || !strings.Contains(err.Error(), "has no webhook endpoint "+id) {
			t.Errorf("%s of a deleted endpoint: %v", verb, err)
		}
	}
	if _, err := c.run("webhook-endpoint", "enable", "--workspace", ws); err == nil || !strings.Contains(err.Error(), "--id is required") {
		t.Errorf("enable without --id: %v", err)
	}
	if _, err := c.run("webhook-endpoint", "list", "--workspace", "no-such-workspace"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("list of an unknown workspace: %v", err)
	}
	if c.rows(ws) != 0 || len(wanting("CONTACT_CREATED")) != 0 {
		t.Fatal("the deleted endpoint is still there")
	}
}

// TestEndpointFailingAndAutoDisable: MarkFailing keeps the start of a run
// of failures, ClearFailing ends it; Disable keeps the first reason.
func TestEndpointFailingAndAutoDisable(t *testing.T) {
	c := newCLI(t)
	ws := c.workspace("endpoints failing")
	id, _ := c.create(ws)
	ctx := context.Background()
	s := c.store()
	t0 := c.now.Add(time.Minute)
	for i, at := range []time.Time{t0, t0.Add(5 * time.Hour)} {
		if since, err := s.MarkFailing(ctx, ws, id, at); err != nil || !since.Equal(t0) {
			t.Fatalf("MarkFailing %d: %v %v, want %v", i, since, err, t0)
		}
	}
	if err := s.ClearFailing(ctx, ws, id); err != nil {
		t.Fatal(err)
	}
	t1 := t0.Add(6 * time.Hour)
	if since, err := s.MarkFailing(ctx, ws, id, t1); err != nil || !since.Equal(t1) {
		t.Fatalf("MarkFailing after ClearFailing: %v %v", since, err)
	}
	if _, err := s.MarkFailing(ctx, c.workspace("other"), id, t1); !errors.Is(err, webhook.ErrEndpointNotFound) {
		t.Fatalf("MarkFailing from another workspace: %v", err)
	}
	e, err := s.Disable(ctx, ws, id, webhook.DisabledFailing)
	if err != nil || e.Enabled || e.DisabledReason != webhook.DisabledFailing || e.FailingSince == nil || !e.FailingSince.Equal(t1) {
		t.Fatalf("Disable: %+v %v", e, err)
	}
	if e, err = s.Disable(ctx, ws, id, webhook.DisabledGone); err != nil || e.DisabledReason != webhook.DisabledFailing {
		t.Fatalf("second Disable changed the reason: %+v %v", e, err)
	}
}

// TestEndpointWorkspaceIsolation: another workspace can neither see nor
// change an endpoint, nor read its secrets.
func TestEndpointWorkspaceIsolation(t *testing.T) {
	c := newCLI(t)
	a, b := c.workspace("endpoints A"), c.workspace("endpoints B")
	id, secret := c.create(a)
	for _, verb := range []string{"enable", "disable", "rotate-secret", "delete"} {
		if _, err := c.run("webhook-endpoint", verb, "--workspace", b, "--id", id); err == nil || !strings.Contains(err.Error(), "workspace "+b+" has no webhook endpoint "+id) {
			t.Errorf("%s of A's endpoint from B: %v", verb, err)
		}
	}
	if m := c.must("webhook-endpoint", "list", "--workspace", b); len(m["endpoints"].([]any)) != 0 {
		t.Fatalf("B lists A's endpoint: %v", m)
	}
	ctx := context.Background()
	s := c.store()
	if _, err := s.Secrets(ctx, b, id, c.now); !errors.Is(err, webhook.ErrEndpointNotFound) {
		t.Fatalf("B read A's secrets: %v", err)
	}
	if h, ok, err := s.Lookup(ctx, b, id); ok || err != nil {
		t.Fatalf("B's delivery found A's endpoint: %+v %v", h, err)
	}
	if err := s.Retire(ctx, b, id); err != nil {
		t.Fatal(err)
	}
	if eps, err := s.EndpointsFor(ctx, b, "CONTACT_CREATED"); err != nil || len(eps) != 0 {
		t.Fatalf("B's fan-out finds A's endpoint: %v %v", eps, err)
	}
	eps, err := s.List(ctx, a)
	if err != nil || len(eps) != 1 || !eps[0].Enabled || eps[0].PreviousSecretExpiresAt != nil {
		t.Fatalf("A's endpoint changed: %+v %v", eps, err)
	}
	if got := c.secrets(a, id, c.now); len(got) != 1 || got[0] != secret {
		t.Fatalf("A's secret changed: %q", got)
	}
}

// TestEndpointRotateSecret: after rotate-secret both secrets sign for 24
// hours (current first, then the previous: two space-separated
// signatures), then only the new one.
func TestEndpointRotateSecret(t *testing.T) {
	c := newCLI(t)
	ws := c.workspace("endpoints rotation")
	id, old := c.create(ws)
	c.now = c.now.Add(time.Hour)
	rotatedAt := c.now
	m := c.must("webhook-endpoint", "rotate-secret", "--workspace", ws, "--id", id)
	fresh, _ := m["secret"].(string)
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(fresh, "whsec_"))
	if m["id"] != id || len(m) != 2 || !strings.HasPrefix(fresh, "whsec_") || err != nil || len(key) != 24 || fresh == old {
		t.Fatalf("rotate-secret: %v", m)
	}
	within := c.secrets(ws, id, rotatedAt.Add(rotationAlmost))
	if len(within) != 2 || within[0] != fresh || within[1] != old {
		t.Fatalf("secrets within 24 h: %q, want [new old]", within)
	}
	signed := webhook.Sign(within, "msg_1", rotatedAt, []byte(`{}`))
	if sigs := strings.Fields(signed.Signature); len(sigs) != 2 || !strings.HasPrefix(sigs[0], "v1,") || !strings.HasPrefix(sigs[1], "v1,") {
		t.Fatalf("signature during rotation: %q", signed.Signature)
	}
	after := c.secrets(ws, id, rotatedAt.Add(webhook.RotationOverlap))
	if len(after) != 1 || after[0] != fresh {
		t.Fatalf("secrets 24 h after the rotation: %q, want only the new one", after)
	}
	eps, err := c.store().List(context.Background(), ws)
	if err != nil || len(eps) != 1 || eps[0].PreviousSecretExpiresAt == nil || !eps[0].PreviousSecretExpiresAt.Equal(rotatedAt.Add(24*time.Hour)) {
		t.Fatalf("listed rotation end: %+v %v", eps, err)
	}
}

// rotationAlmost is a moment before the rotation overlap ends.
const rotationAlmost = webhook.RotationOverlap - time.Second
