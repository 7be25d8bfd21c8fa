package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/mail"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"sendstream/deploy/stack"
	"sendstream/ingest/contacts"
	"sendstream/ingest/members"
	"sendstream/schemas"
	"sendstream/sinks/email/smtptest"
)

// mailLinkRe is an invitation link in an email's text.
var mailLinkRe = regexp.MustCompile(`https?://[^\s"<]+/invitation\?token=[A-Za-z0-9_-]+`)

// startInviteMail is the pages server (delivery stage and SMTP test
// server included) with invitation emails on: the members store writes
// them into a contacts outbox of a scope of this test's own, so only
// this test relays its rows.
func startInviteMail(t *testing.T) (*pages, *contacts.Store) {
	t.Helper()
	p := startPages(t)
	ob := contacts.NewStore(stack.PG(t))
	ob.SetOutboxScope("invite-mail-test-" + schemas.NewID())
	t.Cleanup(ob.Close)
	p.members.SetOutbox(ob)
	return p, ob
}

// addDomain gives ws a sending domain (without DKIM) and returns it.
func addDomain(t *testing.T, p *pages, ws string) string {
	t.Helper()
	domain := "invites-" + strings.ToLower(ws) + ".example"
	if _, err := p.h.PG.Exec(context.Background(), "INSERT INTO sending_domains (workspace_id, domain) VALUES ($1, $2)", ws, domain); err != nil {
		t.Fatal(err)
	}
	return domain
}

// jsonCall sends a JSON request as a same-origin browser script would,
// with the session cookie.
func (e *env) jsonCall(method, path, cookie string, body any) (int, string) {
	e.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.h.URL+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Cookie", cookie)
	resp, b := e.send(req)
	return resp.StatusCode, b
}

// mailTo waits for the message to addr on srv and returns its subject,
// From and decoded text parts.
func mailTo(t *testing.T, srv *smtptest.Server, addr string) (subject, from, text string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		for _, m := range srv.Wait(len(srv.Messages())+1, time.Second) {
			if len(m.To) != 1 || !strings.EqualFold(m.To[0], addr) {
				continue
			}
			pm, err := mail.ReadMessage(bytes.NewReader(m.Data))
			if err != nil {
				t.Fatalf("the email does not parse: %v", err)
			}
			subject, _ = new(mime.WordDecoder).DecodeHeader(pm.Header.Get("Subject"))
			return subject, pm.Header.Get("From"), decodeParts(t, pm.Header.Get("Content-Type"), pm.Header.Get("Content-Transfer-Encoding"), pm.Body)
		}
	}
	t.Fatalf("no email to %s within 30 s", addr)
	return
}

// decodeParts returns the decoded text of every leaf part of a MIME body.
func decodeParts(t *testing.T, ctype, cte string, body io.Reader) string {
	t.Helper()
	parts, err := smtptest.Parts(ctype, cte, body)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, p := range parts {
		out.WriteString(p.Text)
		out.WriteString("\n")
	}
	return out.String()
}

// messageStatus waits until the transactional message of ws to addr has
// status want and returns its id.
func messageStatus(t *testing.T, p *pages, ws, addr, want string) string {
	t.Helper()
	var id, status string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		err := p.h.PG.QueryRow(context.Background(),
			"SELECT id, status FROM transactional_messages WHERE workspace_id = $1 AND to_email = $2", ws, addr).Scan(&id, &status)
		if err == nil && status == want {
			return id
		}
	}
	t.Fatalf("message of %s to %s: status %q, want %q", ws, addr, status, want)
	return ""
}

// TestInvitationEmailed: the invitee receives the invitation by email
// through the transactional path (from the workspace's domain, naming the
// inviter and the workspace, listed in the message log); the email's link
// is the one the page shows once, and following it the invitee joins and
// signs in. A workspace without a sending domain or default sender gets
// no email, and the page says why.
func TestInvitationEmailed(t *testing.T) {
	p, _ := startInviteMail(t)
	ws, ownerEmail, owner := p.member("", "owner", "")
	var wsName string
	if err := p.h.PG.QueryRow(context.Background(), "SELECT name FROM workspaces WHERE id = $1", ws).Scan(&wsName); err != nil {
		t.Fatal(err)
	}

	// No sending domain yet: the link, and why no email went out.
	early := "early." + strings.ToLower(ws) + "@example.com"
	resp, body := p.do("POST", "/settings/members", owner, inviteForm(early, "member"), nil)
	if resp.StatusCode != 200 || inviteLinkRe.FindStringSubmatch(body) == nil ||
		!strings.Contains(body, `id="invitation-not-emailed"`) || !strings.Contains(body, "the workspace has no sending domain") {
		t.Fatalf("invite without a sending domain: %d\n%s", resp.StatusCode, body)
	}
	var n int
	if err := p.h.PG.QueryRow(context.Background(), "SELECT count(*) FROM transactional_messages WHERE workspace_id = $1", ws).Scan(&n); err != nil || n != 0 {
		t.Fatalf("messages stored without a sending domain: %d %v", n, err)
	}

	domain := addDomain(t, p, ws)
	invitee := "invitee." + strings.ToLower(ws) + "@example.com"
	resp, body = p.do("POST", "/settings/members", owner, inviteForm(invitee, "admin"), nil)
	m := inviteLinkRe.FindStringSubmatch(body)
	if resp.StatusCode != 200 || m == nil || !strings.Contains(body, `id="invitation-emailed"`) ||
		!strings.Contains(body, "the invitation link was emailed to "+invitee) {
		t.Fatalf("invite: %d, link shown %v\n%s", resp.StatusCode, m != nil, body)
	}
	shown := m[1]

	subject, from, text := mailTo(t, p.smtp, invitee)
	if !strings.Contains(subject, ownerEmail) || !strings.Contains(subject, wsName) {
		t.Errorf("subject %q lacks the inviter %s or the workspace %q", subject, ownerEmail, wsName)
	}
	if !strings.Contains(from, "noreply@"+domain) {
		t.Errorf("From %q, want the workspace's domain %s", from, domain)
	}
	links := mailLinkRe.FindAllString(text, -1)
	if len(links) == 0 || links[0] != shown || !strings.Contains(text, wsName) || !strings.Contains(text, ownerEmail) {
		t.Fatalf("email links %v, page link %s, text:\n%s", links, shown, text)
	}
	for _, l := range links {
		if l != shown {
			t.Errorf("the email carries another link %s", l)
		}
	}
	// The message log lists it, sent.
	messageStatus(t, p, ws, invitee, "sent")
	if resp, body := p.do("GET", "/logs/messages", owner, nil, nil); resp.StatusCode != 200 || !strings.Contains(body, invitee) {
		t.Errorf("the message log lacks the invitation email: %d", resp.StatusCode)
	}

	// Following the email's link: the page, accepting, signing in.
	link, err := url.Parse(links[0])
	if err != nil {
		t.Fatal(err)
	}
	if resp, _ := p.do("GET", link.RequestURI(), "", nil, nil); resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", link.RequestURI(), resp.StatusCode)
	}
	resp, _ = p.do("POST", "/invitation", "", url.Values{"token": {link.Query().Get("token")}, "password": {"invitee password"}}, nil)
	if resp.StatusCode != 303 {
		t.Fatalf("accepting from the email: %d", resp.StatusCode)
	}
	resp, _ = p.do("POST", "/login", "", url.Values{"email": {invitee}, "password": {"invitee password"}, "next": {"/settings/members"}}, nil)
	cookie := sessionCookie(t, resp.Cookies())
	if resp.StatusCode != 303 || cookie == "" {
		t.Fatalf("sign-in of the invitee: %d", resp.StatusCode)
	}
	if resp, body := p.do("GET", "/settings/members", cookie, nil, nil); resp.StatusCode != 200 || workspaceShown(body, invitee) != wsName {
		t.Fatalf("the invitee's page: %d, workspace %q, want %q", resp.StatusCode, workspaceShown(body, invitee), wsName)
	}
}

// TestInvitationEmailCommittedWithInvitation: the email is stored with the
// invitation, before the answer, so dying right after the commit loses
// nothing. The JSON route answers 201 with the message id, whose row and
// outbox envelope are already committed; an invitation created without
// publishing (as if the process died right after the commit) is still
// emailed, by the outbox relay.
func TestInvitationEmailCommittedWithInvitation(t *testing.T) {
	p, ob := startInviteMail(t)
	ws, ownerEmail, owner := p.member("", "owner", "")
	addDomain(t, p, ws)
	ctx := context.Background()

	invitee := "json." + strings.ToLower(ws) + "@example.com"
	st, body := p.jsonCall("POST", "/api/invitations", owner, map[string]any{"email": invitee, "role": "member"})
	var inv members.Invitation
	if st != 201 || json.Unmarshal([]byte(body), &inv) != nil || !inv.Emailed || inv.MessageID == "" || inv.AcceptURL == "" {
		t.Fatalf("POST /api/invitations: %d %s", st, body)
	}
	var to, status string
	if err := p.h.PG.QueryRow(ctx, "SELECT to_email, status FROM transactional_messages WHERE id = $1", inv.MessageID).Scan(&to, &status); err != nil || to != invitee {
		t.Fatalf("the answered message %s is not stored: %q %v", inv.MessageID, to, err)
	}
	if _, _, text := mailTo(t, p.smtp, invitee); !strings.Contains(text, inv.AcceptURL) {
		t.Fatalf("the email lacks %s:\n%s", inv.AcceptURL, text)
	}

	// Created, committed, never published: the process "died" here.
	by := members.Member{ID: p.memberID(ws, ownerEmail), Workspace: ws, Email: ownerEmail, Role: members.RoleOwner}
	late := "late." + strings.ToLower(ws) + "@example.com"
	inv, err := p.members.Invite(ctx, by, late, members.RoleMember, nil, time.Now())
	if err != nil || !inv.Emailed {
		t.Fatalf("Invite: %+v %v", inv, err)
	}
	var rows int
	if err := p.h.PG.QueryRow(ctx, "SELECT count(*) FROM contact_outbox WHERE workspace_id = $1 AND contact_id = $2", ws, inv.MessageID).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("outbox rows of the unpublished email: %d %v", rows, err)
	}
	if err := p.h.PG.QueryRow(ctx, "SELECT status FROM transactional_messages WHERE id = $1", inv.MessageID).Scan(&status); err != nil || status != "queued" {
		t.Fatalf("unpublished message: %q %v", status, err)
	}
	if n, err := ob.RelayWorkspaceOnce(ctx, p.h.Publisher, ws, 0, 100); err != nil || n < 1 {
		t.Fatalf("relay: %d rows %v", n, err)
	}
	if _, _, text := mailTo(t, p.smtp, late); !strings.Contains(text, inv.AcceptURL) {
		t.Fatalf("the relayed email lacks %s:\n%s", inv.AcceptURL, text)
	}
	messageStatus(t, p, ws, late, "sent")
}
