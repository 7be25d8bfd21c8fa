package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"sendstream/schemas"
	"sendstream/sinks/email/smtptest"
)

// TestInvitationEmailedThroughServe: the binary's wiring of invitation
// emails (serve.go gives the members store the contacts outbox). An owner
// invites someone over POST /api/invitations on a `serve` process; the
// answer says the link is emailed, and the SMTP server receives a message
// for the invitee from the workspace's sending domain that carries the
// invitation's token.
func TestInvitationEmailedThroughServe(t *testing.T) {
	e := newE2E(t)
	got := make(chan smtptest.Message, 16)
	smtp := smtptest.Start(t, smtptest.Options{Data: func(m smtptest.Message) error {
		got <- m
		return nil
	}})
	_, base := e.serverWith(t, "serve", "SENDSTREAM_SMTP_URL=smtp://"+smtp.Addr+"?tls=none")
	var ws workspace
	e.admin(t, &ws, "workspace", "create", "--name", "invite-e2e")
	domain := "invite" + strings.ToLower(schemas.NewID()) + ".example.com"
	var d map[string]any
	e.admin(t, &d, "domain", "add", "--workspace", ws.WorkspaceID, "--domain", domain, "--no-dkim")
	owner := "owner" + strings.ToLower(schemas.NewID()) + "@example.com"
	var m map[string]string
	e.admin(t, &m, "member", "create", "--workspace", ws.WorkspaceID, "--email", owner, "--password", "correct horse", "--role", "owner")

	client := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(path, ctype string, body []byte, cookie *http.Cookie) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		if cookie != nil {
			req.AddCookie(cookie)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, _ := post("/login", "application/x-www-form-urlencoded", []byte(url.Values{"email": {owner}, "password": {"correct horse"}}.Encode()), nil)
	if resp.StatusCode != 303 || len(resp.Cookies()) != 1 {
		t.Fatalf("POST /login: %d", resp.StatusCode)
	}
	invitee := "invitee" + strings.ToLower(schemas.NewID()) + "@example.com"
	body, _ := json.Marshal(map[string]any{"email": invitee, "role": "member"})
	resp, b := post("/api/invitations", "application/json", body, resp.Cookies()[0])
	var inv struct {
		AcceptURL string `json:"acceptUrl"`
		Emailed   bool   `json:"emailed"`
	}
	if err := json.Unmarshal(b, &inv); resp.StatusCode != 201 || err != nil || !inv.Emailed || inv.AcceptURL == "" {
		t.Fatalf("POST /api/invitations: %d %s", resp.StatusCode, b)
	}
	u, err := url.Parse(inv.AcceptURL)
	if err != nil || u.Query().Get("token") == "" {
		t.Fatalf("acceptUrl %q", inv.AcceptURL)
	}
	token := u.Query().Get("token")
	for deadline := time.After(60 * time.Second); ; {
		select {
		case msg := <-got:
			if len(msg.To) != 1 || msg.To[0] != invitee {
				continue
			}
			// Soft line breaks of quoted-printable may split the token.
			flat := strings.NewReplacer("=\r\n", "", "=\n", "").Replace(string(msg.Data))
			if !strings.HasSuffix(msg.From, "@"+domain) || !strings.Contains(flat, token) {
				t.Fatalf("invitation email from %q without the token %s:\n%s", msg.From, token, msg.Data)
			}
			return
		case <-deadline:
			t.Fatal("no invitation email reached the SMTP server within 60 s")
		}
	}
}
