package optin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/emersion/go-msgauth/dkim"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/deploy/stack"
	"sendstream/ingest/contacts"
	"sendstream/ingest/ingesttest"
	"sendstream/ingest/transactional"
	"sendstream/pipeline"
	"sendstream/pipeline/pipelinetest"
	"sendstream/schemas"
	"sendstream/sinks/email"
	"sendstream/sinks/email/smtptest"
	"sendstream/stages/delivery"
	"sendstream/stages/messagelog"
	"sendstream/stages/optin"
)

const site = "http://site.invalid" // the routes' site URL; links are rewritten to the harness

var linkRE = regexp.MustCompile(`http://site\.invalid/confirm\?token=[A-Za-z0-9_.%-]+`)

// TestDoubleOptInEndToEnd drives the whole flow over real HTTP, a real
// broker, the real stage runner (optin, delivery, messagelog), Postgres,
// ClickHouse and a real SMTP server: the sign-up; the confirmation email
// received from the sender of the workspace's default Transactional
// policy, DKIM-signed with its domain's key; the message stored as a
// transactional message of the workspace (sent) and in the ClickHouse
// message log (queued, sent); the link followed, the membership ACTIVE and
// the webhook events published once; one email in all.
func TestDoubleOptInEndToEnd(t *testing.T) {
	pool := stack.PG(t)
	ch := stack.CH(t)
	store := contacts.NewStore(pool)
	t.Cleanup(store.Close)
	signer, err := contacts.NewSigner("e2e-secret-0123456789abcdef", 0)
	if err != nil {
		t.Fatal(err)
	}
	h := ingesttest.Start(t, contacts.Routes(contacts.Deps{Store: store, Signer: signer, SiteURL: site})...)
	mails := smtptest.Start(t, smtptest.Options{})

	ctx := context.Background()
	ws, key := h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	tx := transactional.NewStore(pool)
	privPEM, txt, err := email.GenerateDKIMKey()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.AddDomain(ctx, ws, transactional.Domain{Domain: "acme.test", Selector: "s1", PrivateKey: privPEM}); err != nil {
		t.Fatal(err)
	}
	policyID, err := tx.CreatePolicy(ctx, ws, transactional.Policy{Key: transactional.DefaultPolicyKey, Kind: schemas.PolicyTransactional,
		FromEmail: "news@acme.test", FromName: "Acme News"})
	if err != nil {
		t.Fatal(err)
	}
	runStages(t, h, pool, ch, "smtp://"+mails.Addr+"?tls=none")

	l, err := store.CreateList(ctx, ws, "Weekly digest", true)
	if err != nil {
		t.Fatal(err)
	}
	st, body := doForm(t, h, "/forms/"+l.ID, "email=Erin%40Example.com&firstName=Erin")
	if st != 200 || !strings.Contains(body, "Check your inbox") {
		t.Fatalf("sign-up: %d %s", st, body)
	}
	if got := membership(t, h, key, "erin@example.com"); got != "PENDING/PENDING" {
		t.Fatalf("after sign-up: %s", got)
	}

	// The email arrives at the SMTP server, from the policy's sender.
	msgs := mails.Wait(1, 30*time.Second)
	if len(msgs) != 1 {
		t.Fatalf("emails received: %d, want 1", len(msgs))
	}
	m := parse(t, msgs[0].Data)
	if msgs[0].From != "news@acme.test" || len(msgs[0].To) != 1 || msgs[0].To[0] != "erin@example.com" {
		t.Fatalf("envelope: from %q to %v", msgs[0].From, msgs[0].To)
	}
	if from := m.header.Get("From"); from != `"Acme News" <news@acme.test>` && from != "Acme News <news@acme.test>" {
		t.Errorf("From header %q", from)
	}
	if subj := m.header.Get("Subject"); subj != "Confirm your subscription to Weekly digest" {
		t.Errorf("subject %q", subj)
	}
	// DKIM-signed with the key of the sender's domain.
	vs, err := dkim.VerifyWithOptions(bytes.NewReader(msgs[0].Data), &dkim.VerifyOptions{LookupTXT: func(d string) ([]string, error) {
		if d != "s1._domainkey.acme.test" {
			return nil, errors.New("unexpected dkim lookup " + d)
		}
		return []string{txt}, nil
	}})
	if err != nil || len(vs) != 1 || vs[0].Err != nil || vs[0].Domain != "acme.test" {
		t.Fatalf("dkim: %v %+v", err, vs)
	}
	if !strings.Contains(m.text, "Hello Erin,") || !strings.Contains(m.html, "<b>Weekly digest</b>") {
		t.Errorf("parts:\n%s\n%s", m.text, m.html)
	}
	link := linkRE.FindString(m.text)
	if link == "" || !strings.Contains(m.html, `href="`+link+`"`) {
		t.Fatalf("confirmation link %q missing from a part:\n%s\n%s", link, m.text, m.html)
	}

	// A transactional message of the workspace, in Postgres and in the
	// ClickHouse message log.
	id := m.header.Get("X-Sendstream-Message-Id")
	if m.header.Get("Message-Id") != "<"+id+"@acme.test>" {
		t.Errorf("Message-ID %q for message %q", m.header.Get("Message-Id"), id)
	}
	var status, to, policy string
	var contactID *string
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := pool.QueryRow(ctx, "SELECT status, to_email, policy_id, contact_id FROM transactional_messages WHERE id = $1 AND workspace_id = $2",
			id, ws).Scan(&status, &to, &policy, &contactID)
		if err != nil {
			t.Fatalf("message row: %v", err)
		}
		if status == schemas.MessageSent || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if status != schemas.MessageSent || to != "erin@example.com" || policy != policyID || contactID == nil || *contactID == "" {
		t.Errorf("message row: status %s to %s policy %s (want %s) contact %v", status, to, policy, policyID, contactID)
	}
	if got := logStatuses(t, ch, ws, id, 2); strings.Join(got, ",") != "queued,sent" {
		t.Errorf("message log: %v, want queued,sent", got)
	}

	// The link, followed over HTTP, activates the membership and the contact.
	st, body = get(t, h, strings.TrimPrefix(link, site))
	if st != 200 || !strings.Contains(body, "Subscription confirmed") {
		t.Fatalf("click: %d %s", st, body)
	}
	if got := membership(t, h, key, "erin@example.com"); got != "ACTIVE/ACTIVE" {
		t.Fatalf("after click: %s", got)
	}
	st, body = get(t, h, strings.TrimPrefix(link, site))
	if st != 200 || !strings.Contains(body, "already confirmed") {
		t.Fatalf("second click: %d %s", st, body)
	}

	// Both webhook events were published exactly once.
	count := map[string]int{}
	for _, env := range h.Consume(t, schemas.TopicContacts) {
		if env.Workspace == ws {
			count[schemas.ContactWebhookEvents[env.Type]]++
		}
	}
	if count["LIST_SUBSCRIPTION_CONFIRMED"] != 1 || count["CONTACT_CONFIRMED"] != 1 || count["CONTACT_CREATED"] != 1 {
		t.Fatalf("webhook events: %v", count)
	}
	// And only one email was ever sent.
	time.Sleep(500 * time.Millisecond)
	if n := len(mails.Messages()); n != 1 {
		t.Fatalf("emails: %d", n)
	}
}

// runStages runs the optin, delivery, messagelog and messagestatus stages
// on h's broker until the test ends.
func runStages(t *testing.T, h *ingesttest.Harness, pool *pgxpool.Pool, ch driver.Conn, smtpURL string) {
	t.Helper()
	stages, err := pipeline.SelectStages(optin.Name, delivery.Name, messagelog.Name, messagelog.StatusName)
	if err != nil {
		t.Fatal(err)
	}
	pipelinetest.Start(context.Background(), t, "pipeline", pipeline.RunConfig{
		Brokers: h.Brokers, Stages: stages,
		Resources: pipeline.Resources{Postgres: pool, ClickHouse: ch, Publisher: h.Publisher,
			Settings: map[string]string{"smtp_url": smtpURL, "secret": "optin-test-secret", "site_url": site}},
		BackoffBase: 50 * time.Millisecond, BackoffMax: 300 * time.Millisecond, FlushInterval: 100 * time.Millisecond,
		MaxWait: 50 * time.Millisecond,
	})
}

// logStatuses returns the message_status rows of a message, one per event,
// in time order, waiting up to 30 s for want of them.
func logStatuses(t *testing.T, ch driver.Conn, ws, messageID string, want int) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rows, err := ch.Query(context.Background(),
			"SELECT status FROM message_status WHERE workspace = ? AND message_id = ? ORDER BY at, indexOf(['queued', 'sent', 'failed'], status) LIMIT 1 BY event_id", ws, messageID)
		if err != nil {
			t.Fatalf("clickhouse: %v", err)
		}
		var out []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		rows.Close()
		if len(out) >= want || time.Now().After(deadline) {
			return out
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func doForm(t *testing.T, h *ingesttest.Harness, path, body string) (int, string) {
	t.Helper()
	resp, err := h.Client.Post(h.URL+path, "application/x-www-form-urlencoded", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func get(t *testing.T, h *ingesttest.Harness, path string) (int, string) {
	t.Helper()
	resp, err := h.Client.Get(h.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// membership returns "<contact status>/<first membership status>".
func membership(t *testing.T, h *ingesttest.Harness, key, email string) string {
	t.Helper()
	st, body := h.Do("GET", "/api/v1/contacts/search?email="+email, key, nil)
	if st != 200 {
		t.Fatalf("search: %d %s", st, body)
	}
	var c contacts.ContactWithLists
	if err := json.Unmarshal(body, &c); err != nil || len(c.Lists) != 1 {
		t.Fatalf("search: %s", body)
	}
	return c.Status + "/" + c.Lists[0].Status
}
