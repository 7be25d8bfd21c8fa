package main

import (
	"context"
	"strings"
	"testing"

	"sendstream/deploy/stack"
	"sendstream/ingest/transactional"
)

// TestAdminEmailRule: the admin commands take addresses and domains by the
// one email rule: a domain added in its Unicode spelling is stored in its
// IDNA ASCII form, a sender on either spelling matches it and is stored
// ASCII, and a member or sender address with a bidi override, a zero-width
// space or a fullwidth local part is refused.
func TestAdminEmailRule(t *testing.T) {
	pg := stack.PG(t)
	ws := mustAdmin(t, "workspace", "create", "--name", "Email rule")["workspaceId"].(string)

	d := mustAdmin(t, "domain", "add", "--workspace", ws, "--domain", "Bücher.Example", "--no-dkim")
	if d["domain"] != "xn--bcher-kva.example" {
		t.Fatalf("domain add: %v", d)
	}
	if again := mustAdmin(t, "domain", "add", "--workspace", ws, "--domain", "xn--bcher-kva.example", "--no-dkim"); again["domain"] != d["domain"] {
		t.Fatalf("the A-label spelling is another domain: %v", again)
	}
	for _, bad := range []string{"bü\u200bcher.example", "xn--zz.example", "localhost"} {
		if _, err := admin(t, "domain", "add", "--workspace", ws, "--domain", bad); err == nil {
			t.Errorf("domain add %q accepted", bad)
		}
	}

	p := mustAdmin(t, "send-policy", "create", "--workspace", ws, "--key", "news", "--kind", "marketing", "--from-email", "News@BÜCHER.example")
	look, err := transactional.NewStore(pg).Lookup(context.Background(), ws, transactional.LookupInput{Email: "x@y.test", Addresses: []string{"x@y.test"}, PolicyRef: "news"})
	if err != nil || look.Policy == nil || look.Policy.FromEmail != "news@xn--bcher-kva.example" || look.Policy.ID != p["id"] {
		t.Fatalf("stored policy: %+v %v", look.Policy, err)
	}
	for _, from := range []string{"news\u202e@bücher.example", "ｎｅｗｓ@bücher.example"} {
		_, err := admin(t, "send-policy", "create", "--workspace", ws, "--key", "x", "--kind", "transactional", "--from-email", from)
		if err == nil || !strings.Contains(err.Error(), "--from-email") {
			t.Errorf("send-policy --from-email %q: %v", from, err)
		}
	}

	if _, err := admin(t, "member", "create", "--workspace", ws, "--email", "eve\u202e@example.com", "--password", "long enough", "--role", "member"); err == nil ||
		!strings.Contains(err.Error(), "bidirectional") {
		t.Errorf("member with a bidi override: %v", err)
	}
	mustAdmin(t, "member", "create", "--workspace", ws, "--email", "Ann@Bücher.Example", "--password", "long enough", "--role", "member")
	var n int
	if err := pg.QueryRow(context.Background(), "SELECT count(*) FROM members WHERE workspace_id = $1 AND email = 'ann@xn--bcher-kva.example'", ws).Scan(&n); err != nil || n != 1 {
		t.Fatalf("stored member: %d %v", n, err)
	}
}
