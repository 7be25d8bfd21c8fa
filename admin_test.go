package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"sendstream/deploy/stack"
	"sendstream/ingest/auth"
)

// admin runs `sendstream admin args...` and decodes its one JSON object.
func admin(t *testing.T, args ...string) (map[string]any, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := runAdmin(context.Background(), args, &out, &errOut)
	if err != nil {
		if out.Len() != 0 {
			t.Fatalf("admin %v failed but wrote stdout: %s", args, out.String())
		}
		return nil, err
	}
	var m map[string]any
	if e := json.Unmarshal(out.Bytes(), &m); e != nil || strings.Count(strings.TrimSpace(out.String()), "\n") != 0 {
		t.Fatalf("admin %v: stdout is not one JSON object: %q", args, out.String())
	}
	return m, nil
}

func mustAdmin(t *testing.T, args ...string) map[string]any {
	t.Helper()
	m, err := admin(t, args...)
	if err != nil {
		t.Fatalf("admin %v: %v", args, err)
	}
	return m
}

func TestAdminWorkspaceKeysMembersTokens(t *testing.T) {
	pg := stack.PG(t) // starts the stack when needed; admin finds it the same way
	ctx := context.Background()
	ws := mustAdmin(t, "workspace", "create", "--name", "Admin Test", "--plan", "enterprise", "--rate-multiplier", "1000")
	wsID, _ := ws["workspaceId"].(string)
	key, _ := ws["apiKey"].(string)
	if wsID == "" || !strings.HasPrefix(key, auth.APIKeyPrefix) {
		t.Fatalf("workspace create: %v", ws)
	}
	id, err := auth.NewStore(pg).Resolve(ctx, auth.KindAPIKey, auth.Hash(key))
	if err != nil || id.Workspace != wsID || id.Plan != "enterprise" || id.RateMultiplier != 1000 || id.ContactLimit != 0 {
		t.Fatalf("created workspace: %+v %v", id, err)
	}
	free := mustAdmin(t, "workspace", "create", "--name", "Free", "--contact-limit", "5")
	fid, _ := auth.NewStore(pg).Resolve(ctx, auth.KindAPIKey, auth.Hash(free["apiKey"].(string)))
	if fid.Plan != "free" || fid.ContactLimit != 5 || fid.RateMultiplier != 1 {
		t.Fatalf("free workspace: %+v", fid)
	}

	if m := mustAdmin(t, "workspace", "suspend", "--workspace", wsID); m["suspended"] != true || m["workspaceId"] != wsID {
		t.Fatalf("suspend: %v", m)
	}
	if m := mustAdmin(t, "workspace", "resume", "--workspace", wsID); m["suspended"] != false {
		t.Fatalf("resume: %v", m)
	}

	k := mustAdmin(t, "apikey", "create", "--workspace", wsID, "--scopes", "contacts:read,events:write", "--expires-at", "2099-01-01T00:00:00Z", "--name", "ci")
	kid, _ := k["id"].(string)
	kk, _ := k["key"].(string)
	kident, err := auth.NewStore(pg).Resolve(ctx, auth.KindAPIKey, auth.Hash(kk))
	if err != nil || kident.KeyID != kid || len(kident.Scopes) != 2 || kident.ExpiresAt.Year() != 2099 {
		t.Fatalf("apikey create: %v %+v %v", k, kident, err)
	}
	if _, err := admin(t, "apikey", "create", "--workspace", wsID, "--scopes", "contacts:admin"); err == nil {
		t.Fatal("unknown scope accepted")
	}
	if m := mustAdmin(t, "apikey", "delete", "--workspace", wsID, "--id", kid); m["deleted"] != true {
		t.Fatalf("apikey delete: %v", m)
	}
	if _, err := admin(t, "apikey", "delete", "--workspace", wsID, "--id", kid); err == nil {
		t.Fatal("deleting a deleted key succeeded")
	}

	if m := mustAdmin(t, "member", "create", "--workspace", wsID, "--email", " Owner@Example.com ", "--password", "s3cret-pass", "--role", "owner"); m["id"] == "" {
		t.Fatalf("member create: %v", m)
	}
	var hash string
	if err := pg.QueryRow(ctx, "SELECT l.password_hash FROM members m JOIN logins l ON l.id = m.login_id WHERE m.workspace_id = $1 AND m.email = 'owner@example.com'", wsID).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(hash, "s3cret-pass") || !auth.VerifyPassword(hash, "s3cret-pass") {
		t.Fatal("member password not stored as a verifiable hash")
	}
	if _, err := admin(t, "member", "create", "--workspace", wsID, "--email", "x@example.com", "--password", "longenough", "--role", "king"); err == nil {
		t.Fatal("unknown role accepted")
	}

	tt := mustAdmin(t, "tracking-token", "create", "--workspace", wsID, "--domains", "shop.example, www.shop.example")
	tok, _ := tt["token"].(string)
	tident, err := auth.NewStore(pg).Resolve(ctx, auth.KindTrackingToken, auth.Hash(tok))
	if err != nil || !strings.HasPrefix(tok, auth.TrackingTokenPrefix) || len(tident.Domains) != 2 || tident.KeyID != tt["id"] {
		t.Fatalf("tracking token: %v %+v %v", tt, tident, err)
	}

	for _, bad := range [][]string{{}, {"nope"}, {"workspace", "create"}, {"apikey", "create", "--workspace", "missing-ws"}, {"workspace", "create", "--name", "x", "--plan", "gold"}} {
		if _, err := admin(t, bad...); err == nil {
			t.Errorf("admin %v succeeded", bad)
		}
	}
}

func TestAdminRequests(t *testing.T) {
	ch := stack.CH(t)
	ctx := context.Background()
	ws := "ws-admin-requests-" + time.Now().Format("150405.000000")
	at := time.Now().UTC().Truncate(time.Second)
	batch, err := ch.PrepareBatch(ctx, `INSERT INTO request_log (id, workspace, at, method, path, status, duration_us, key_id, key_kind,
		request_body, response_body, truncated, message_ids, event_ids, journey_run_ids, contact_ids, recipient, external_id,
		ip, user_agent, received)`)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"r1", "r2", "r2"} { // r2 twice: a redelivery
		err := batch.Append(id, ws, at.Add(time.Duration(i/2)*time.Second), "POST", "/api/v1/events", uint16(200), uint64(42), "k1", "api_key",
			`{"password":"[REDACTED]"}`, "{}", uint8(0), []string{}, []string{"e1"}, []string{}, []string{}, "a@example.com", "x1",
			"127.0.0.1", "curl", at)
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatalf("insert: %v", err)
	}
	m := mustAdmin(t, "requests", "--workspace", ws, "--since", at.Add(-time.Minute).Format(time.RFC3339), "--limit", "10")
	reqs, _ := m["requests"].([]any)
	if len(reqs) != 2 {
		t.Fatalf("requests: %v", m)
	}
	first, _ := reqs[0].(map[string]any)
	if first["path"] != "/api/v1/events" || first["status"] != float64(200) || first["externalId"] != "x1" ||
		first["requestBody"] != `{"password":"[REDACTED]"}` || first["durationMs"] != 0.042 {
		t.Fatalf("request row: %v", first)
	}
	if m := mustAdmin(t, "requests", "--workspace", ws, "--since", at.Add(time.Hour).Format(time.RFC3339)); len(m["requests"].([]any)) != 0 {
		t.Fatalf("--since ignored: %v", m)
	}
}

// TestAdminUnknownWorkspace: every command on one workspace refuses a
// workspace that does not exist, naming it, before it changes anything.
func TestAdminUnknownWorkspace(t *testing.T) {
	stack.PG(t)
	const ws = "00000000000000000000000000000000"
	for _, args := range [][]string{
		{"apikey", "create", "--workspace", ws},
		{"member", "create", "--workspace", ws, "--email", "m@example.com", "--password", "longenough", "--role", "member"},
		{"tracking-token", "create", "--workspace", ws},
		{"list", "create", "--workspace", ws, "--name", "News"},
		{"custom-field", "create", "--workspace", ws, "--key", "plan"},
		{"template", "create", "--workspace", ws, "--file", "deploy/examples/template.json"},
		{"send-policy", "create", "--workspace", ws, "--key", "news", "--kind", "marketing"},
		{"domain", "add", "--workspace", ws, "--domain", "example.com"},
	} {
		_, err := admin(t, args...)
		if err == nil || !strings.Contains(err.Error(), "workspace "+ws+" does not exist") {
			t.Errorf("admin %v: %v, want the workspace named as missing", args, err)
		}
	}
}
