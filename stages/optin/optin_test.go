package optin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/mail"
	"net/textproto"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"sendstream/deploy/stack"
	"sendstream/ingest/contacts"
	"sendstream/ingest/ingesttest"
	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/stages/optin"
)

// received is one message the test SMTP server accepted.
type received struct {
	from string
	to   []string
	data []byte
}

// sink is an in-process SMTP server (emersion/go-smtp) that keeps every
// message; refuse makes it answer 550 to RCPT.
type sink struct {
	mu     sync.Mutex
	msgs   []received
	refuse bool
}

func (s *sink) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{sink: s}, nil }

func (s *sink) messages() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.msgs...)
}

type session struct {
	sink *sink
	cur  received
}

func (s *session) Reset()        { s.cur = received{} }
func (s *session) Logout() error { return nil }
func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	s.cur.from = from
	return nil
}
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.sink.mu.Lock()
	refuse := s.sink.refuse
	s.sink.mu.Unlock()
	if refuse {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
	}
	s.cur.to = append(s.cur.to, to)
	return nil
}
func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.cur.data = b
	s.sink.mu.Lock()
	s.sink.msgs = append(s.sink.msgs, s.cur)
	s.sink.mu.Unlock()
	return nil
}

// startSMTP runs the sink on 127.0.0.1:0 and returns its smtp:// URL.
func startSMTP(t *testing.T) (string, *sink) {
	t.Helper()
	sk := &sink{}
	srv := smtp.NewServer(sk)
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true
	srv.ReadTimeout = 10 * time.Second
	srv.WriteTimeout = 10 * time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "smtp://" + ln.Addr().String(), sk
}

const site = "http://site.invalid" // the routes' site URL; links are rewritten to the harness

var linkRE = regexp.MustCompile(`http://site\.invalid/confirm\?token=[A-Za-z0-9_.%-]+`)

// TestDoubleOptInEndToEnd drives the whole flow over real HTTP, a real
// broker, the real stage runner and a real SMTP server: the sign-up, the
// email received, the link followed, the membership ACTIVE and both webhook
// events published once.
func TestDoubleOptInEndToEnd(t *testing.T) {
	pool := stack.PG(t)
	store := contacts.NewStore(pool)
	t.Cleanup(store.Close)
	signer, err := contacts.NewSigner("e2e-secret-0123456789abcdef", 0)
	if err != nil {
		t.Fatal(err)
	}
	h := ingesttest.Start(t, contacts.Routes(contacts.Deps{Store: store, Signer: signer, SiteURL: site})...)
	smtpURL, mails := startSMTP(t)

	reg, ok := pipeline.Lookup(optin.Name)
	if !ok {
		t.Fatal("optin stage not registered")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- pipeline.Run(ctx, pipeline.RunConfig{
			Brokers: h.Brokers, Stages: []pipeline.Registered{reg},
			Resources: pipeline.Resources{Postgres: pool, Publisher: h.Publisher,
				Settings: map[string]string{"smtp_url": smtpURL, "smtp_from": "Sendstream <confirm@example.net>"}},
			Metrics: pipeline.NewRegistry(),
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("pipeline: %v", err)
		}
	})

	ws, key := h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	l, err := store.CreateList(context.Background(), ws, "Weekly digest", true)
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

	// The email arrives at the SMTP server.
	deadline := time.Now().Add(30 * time.Second)
	for len(mails.messages()) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	msgs := mails.messages()
	if len(msgs) != 1 {
		t.Fatalf("emails received: %d, want 1", len(msgs))
	}
	m := msgs[0]
	if m.from != "confirm@example.net" || len(m.to) != 1 || m.to[0] != "erin@example.com" {
		t.Fatalf("envelope: from %q to %v", m.from, m.to)
	}
	parsed, err := mail.ReadMessage(strings.NewReader(string(m.data)))
	if err != nil {
		t.Fatalf("message does not parse: %v", err)
	}
	if subj := parsed.Header.Get("Subject"); !strings.Contains(subj, "Weekly digest") {
		t.Fatalf("subject %q", subj)
	}
	link := linkRE.FindString(string(m.data))
	if link == "" {
		t.Fatalf("no confirmation link in:\n%s", m.data)
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
	if n := len(mails.messages()); n != 1 {
		t.Fatalf("emails: %d", n)
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

// fakeMailer records sends and fails with err.
type fakeMailer struct {
	sent int
	err  error
}

func (f *fakeMailer) Send(context.Context, string, []string, []byte) error {
	f.sent++
	return f.err
}

func optInEnv(t *testing.T, p schemas.OptInRequestedPayload) schemas.Envelope {
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return schemas.Envelope{ID: schemas.NewID(), Workspace: "w", Type: schemas.TypeOptInRequested, Payload: b}
}

func TestStageSkipsOtherTypesAndSendsOnce(t *testing.T) {
	pool := stack.PG(t)
	fm := &fakeMailer{}
	s := optin.New(pool, fm, optin.DefaultConfig())
	ctx := context.Background()
	if _, err := s.Handle(ctx, schemas.Envelope{ID: "x", Type: schemas.TypeContactCreated, Payload: []byte(`{}`)}); err != nil || fm.sent != 0 {
		t.Fatalf("other type: %v, sent %d", err, fm.sent)
	}
	env := optInEnv(t, schemas.OptInRequestedPayload{Email: "a@example.com", ListName: "L", ConfirmURL: "http://x/confirm?token=t"})
	for i := 0; i < 2; i++ {
		if _, err := s.Handle(ctx, env); err != nil {
			t.Fatal(err)
		}
	}
	if fm.sent != 1 {
		t.Fatalf("a redelivered envelope was mailed %d times", fm.sent)
	}
}

func TestStageErrorsArePermanentOnlyWhenRetryCannotHelp(t *testing.T) {
	ctx := context.Background()
	good := schemas.OptInRequestedPayload{Email: "a@example.com", ListName: "L", ConfirmURL: "http://x/confirm?token=t"}
	// A malformed payload is permanent.
	s := optin.New(nil, &fakeMailer{}, optin.DefaultConfig())
	if _, err := s.Handle(ctx, schemas.Envelope{ID: "b", Type: schemas.TypeOptInRequested, Payload: []byte(`[]`)}); !pipeline.IsPermanent(err) {
		t.Fatalf("bad payload: %v", err)
	}
	// A 5xx refusal is permanent, a connection failure is not.
	url, sk := startSMTP(t)
	sk.mu.Lock()
	sk.refuse = true
	sk.mu.Unlock()
	m, err := optin.NewSMTP(url)
	if err != nil {
		t.Fatal(err)
	}
	s = optin.New(nil, m, optin.DefaultConfig())
	if _, err := s.Handle(ctx, optInEnv(t, good)); !pipeline.IsPermanent(err) {
		t.Fatalf("550: %v", err)
	}
	dead, _ := optin.NewSMTP("smtp://127.0.0.1:1")
	s = optin.New(nil, dead, optin.DefaultConfig())
	if _, err := s.Handle(ctx, optInEnv(t, good)); err == nil || pipeline.IsPermanent(err) {
		t.Fatalf("refused connection: %v", err)
	}
}

func TestComposeKeepsHeadersSafe(t *testing.T) {
	from := &mail.Address{Name: "Sendstream", Address: "confirm@example.net"}
	msg := optin.Compose(from, schemas.OptInRequestedPayload{
		Email: "a@example.com", FirstName: "Eve\r\nBcc: victim@example.com", ListName: "News\r\nX-Evil: 1",
		ConfirmURL: "http://site/confirm?token=abc", ExpiresAt: time.Now(),
	}, "envid", time.Now())
	r := textproto.NewReader(bufioReader(string(msg)))
	hdr, err := r.ReadMIMEHeader()
	if err != nil {
		t.Fatal(err)
	}
	if hdr.Get("Bcc") != "" || hdr.Get("X-Evil") != "" || !strings.Contains(hdr.Get("Message-Id"), "envid") {
		t.Fatalf("headers: %v", hdr)
	}
	if !strings.Contains(string(msg), "http://site/confirm?token=abc") {
		t.Fatal("link missing")
	}
}

func bufioReader(s string) *bufio.Reader { return bufio.NewReader(strings.NewReader(s)) }
