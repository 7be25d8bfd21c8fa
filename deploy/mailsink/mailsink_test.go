package mailsink

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html"
	"io"
	"net/http"
	"net/smtp"
	"net/textproto"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	gosmtp "github.com/emersion/go-smtp"

	"sendstream/sinks/email"
	sendsmtp "sendstream/sinks/email/smtp"
)

// start runs a sink on free loopback ports with its store in dir and stops it
// when the test ends.
func start(t *testing.T, cfg Config) *Sink {
	t.Helper()
	cfg.SMTPAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

func get(t *testing.T, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read: %v", url, err)
	}
	return resp, b
}

func list(t *testing.T, s *Sink, query string) []Meta {
	t.Helper()
	resp, b := get(t, s.InboxURL()+"/api/messages"+query)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/messages: %s: %s", resp.Status, b)
	}
	var out struct{ Messages []Meta }
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("decode /api/messages: %v: %s", err, b)
	}
	return out.Messages
}

func TestMessageArrivesInAPI(t *testing.T) {
	s := start(t, Config{})
	msg := crlf(`From: =?UTF-8?Q?J=C3=BCrgen_Sender?= <sender@example.com>
To: Ann <ann@example.com>, bob@example.com
Cc: carol@example.com
Subject: =?UTF-8?B?V2VsY29tZSDwn5GL?=
Date: Mon, 02 Jan 2006 15:04:05 +0000
Message-ID: <one@example.com>

Hello.
`)
	auth := smtp.PlainAuth("", "anyone", "whatever", "127.0.0.1")
	rcpt := []string{"ann@example.com", "bob@example.com", "carol@example.com", "hidden@example.com"}
	if err := smtp.SendMail(s.SMTPAddr(), auth, "bounce@example.com", rcpt, []byte(msg)); err != nil {
		t.Fatalf("SendMail: %v", err)
	}

	// A second message, with AUTH LOGIN over the go-smtp client.
	c, err := gosmtp.Dial(s.SMTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Auth(sasl.NewLoginClient("login-user", "pw")); err != nil {
		t.Fatalf("AUTH LOGIN: %v", err)
	}
	second := crlf("From: b@example.com\nTo: dave@example.com\nSubject: second\n\nbody\n")
	if err := c.SendMail("b@example.com", []string{"dave@example.com"}, strings.NewReader(second)); err != nil {
		t.Fatalf("SendMail (go-smtp): %v", err)
	}
	_ = c.Quit()

	got := list(t, s, "")
	if len(got) != 2 {
		t.Fatalf("got %d messages, want 2: %+v", len(got), got)
	}
	if got[0].Subject != "second" || got[0].AuthUser != "login-user" {
		t.Errorf("newest first: got %q by %q, want %q by login-user", got[0].Subject, got[0].AuthUser, "second")
	}
	m := got[1]
	if m.Subject != "Welcome 👋" {
		t.Errorf("subject = %q, want decoded %q", m.Subject, "Welcome 👋")
	}
	if want := []Address{{"Jürgen Sender", "sender@example.com"}}; !slices.Equal(m.From, want) {
		t.Errorf("from = %+v, want %+v", m.From, want)
	}
	if want := []Address{{"Ann", "ann@example.com"}, {"", "bob@example.com"}}; !slices.Equal(m.To, want) {
		t.Errorf("to = %+v, want %+v", m.To, want)
	}
	if want := []Address{{"", "carol@example.com"}}; !slices.Equal(m.Cc, want) {
		t.Errorf("cc = %+v, want %+v", m.Cc, want)
	}
	if m.MailFrom != "bounce@example.com" || !slices.Equal(m.RcptTo, rcpt) {
		t.Errorf("envelope = %q %v, want bounce@example.com %v", m.MailFrom, m.RcptTo, rcpt)
	}
	if m.AuthUser != "anyone" || m.MessageID != "<one@example.com>" || m.Size != int64(len(msg)) {
		t.Errorf("authUser %q, messageId %q, size %d; want anyone, <one@example.com>, %d", m.AuthUser, m.MessageID, m.Size, len(msg))
	}

	// ?to= matches envelope (Bcc) recipients and header addresses.
	for to, want := range map[string]int{"hidden@example.com": 1, "ANN@example.com": 1, "dave@example.com": 1, "nobody@example.com": 0} {
		if n := len(list(t, s, "?to="+to)); n != want {
			t.Errorf("?to=%s: %d messages, want %d", to, n, want)
		}
	}

	// The JSON of one message carries the parsed body.
	resp, b := get(t, s.InboxURL()+"/api/messages/"+m.ID)
	var one struct {
		ID, Subject, Text string
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &one) != nil || one.ID != m.ID || one.Text != "Hello.\r\n" {
		t.Errorf("GET /api/messages/%s: %s %s", m.ID, resp.Status, b)
	}
}

func TestHTMLViewEscapesAndSandboxes(t *testing.T) {
	s := start(t, Config{})
	htmlBody := `<p class="x">Hi &amp; welcome</p><script>document.title="pwned"</script>"></iframe><script>alert(1)</script>`
	msg := crlf(`From: "<b>Mallory</b>" <m@example.com>
To: victim@example.com
Subject: <script>alert('subject')</script>
MIME-Version: 1.0
Content-Type: multipart/alternative; boundary="b1"

--b1
Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: quoted-printable

Plain <text> & more=E2=80=A6
--b1
Content-Type: text/html; charset=utf-8
Content-Transfer-Encoding: base64

` + wrap64(htmlBody) + `
--b1--
`)
	if err := smtp.SendMail(s.SMTPAddr(), nil, "m@example.com", []string{"victim@example.com"}, []byte(msg)); err != nil {
		t.Fatalf("SendMail: %v", err)
	}
	id := list(t, s, "")[0].ID

	resp, page := get(t, s.InboxURL()+"/messages/"+id)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /messages/%s: %s", id, resp.Status)
	}
	body := string(page)
	if strings.Contains(strings.ToLower(body), "<script") {
		t.Errorf("page contains a raw <script> tag:\n%s", body)
	}
	for _, want := range []string{
		"&lt;script&gt;alert(&#39;subject&#39;)&lt;/script&gt;", // subject
		"&lt;b&gt;Mallory&lt;/b&gt; &lt;m@example.com&gt;",      // From display name
		"Plain &lt;text&gt; &amp; more…",                        // text part, quoted-printable decoded
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks escaped %q", want)
		}
	}
	frames := regexp.MustCompile(`<iframe([^>]*)>`).FindAllStringSubmatch(body, -1)
	if len(frames) != 1 {
		t.Fatalf("want one iframe element, found %d", len(frames))
	}
	attrs := frames[0][1]
	if !strings.Contains(attrs, ` sandbox="allow-popups allow-popups-to-escape-sandbox"`) || strings.Contains(attrs, "allow-scripts") || strings.Contains(attrs, "allow-same-origin") {
		t.Errorf("iframe not sandboxed without scripts: %s", attrs)
	}
	sd := regexp.MustCompile(`srcdoc="([^"]*)"`).FindStringSubmatch(attrs)
	if sd == nil {
		t.Fatalf("iframe has no srcdoc: %s", attrs)
	}
	// The whole HTML body is inside the attribute (it did not end it early).
	if got, want := html.UnescapeString(sd[1]), `<base target="_blank">`+htmlBody; got != want {
		t.Errorf("srcdoc unescapes to\n%s\nwant\n%s", got, want)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
		t.Errorf("CSP %q does not forbid scripts", csp)
	}

	// The list page escapes too.
	_, idx := get(t, s.InboxURL()+"/")
	if strings.Contains(strings.ToLower(string(idx)), "<script") || !strings.Contains(string(idx), "&lt;script&gt;") {
		t.Errorf("list page does not escape the subject:\n%s", idx)
	}
}

func base64Std(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// wrap64 encodes s in base64 lines of 76 characters.
func wrap64(s string) string {
	var b strings.Builder
	enc := []byte(base64Std(s))
	for len(enc) > 76 {
		b.Write(enc[:76])
		b.WriteString("\n")
		enc = enc[76:]
	}
	b.Write(enc)
	return b.String()
}

func TestRawRoundTrips(t *testing.T) {
	s := start(t, Config{})
	// Dot-stuffing, 8-bit UTF-8, a long line and CRLFs must all survive.
	msg := "From: a@example.com\r\nTo: b@example.com\r\nSubject: raw\r\n\r\n" +
		".leading dot\r\n..two dots\r\nnon-ASCII: grüße 日本\r\n" + strings.Repeat("x", 900) + "\r\n.\r\nend\r\n"
	if err := smtp.SendMail(s.SMTPAddr(), nil, "a@example.com", []string{"b@example.com"}, []byte(msg)); err != nil {
		t.Fatalf("SendMail: %v", err)
	}
	id := list(t, s, "")[0].ID
	resp, raw := get(t, s.InboxURL()+"/messages/"+id+".eml")
	if resp.StatusCode != 200 || string(raw) != msg {
		t.Fatalf("GET /messages/%s.eml: %s\n%q\nwant\n%q", id, resp.Status, raw, msg)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("raw Content-Type = %q", ct)
	}
	onDisk, err := os.ReadFile(filepath.Join(s.cfg.Dir, id+".eml"))
	if err != nil || string(onDisk) != msg {
		t.Errorf("%s.eml on disk differs (%v)", id, err)
	}
	for _, path := range []string{"/messages/ffff-0000.eml", "/messages/..%2findex.json", "/messages/nope", "/api/messages/ffff"} {
		if resp, _ := get(t, s.InboxURL()+path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", path, resp.Status)
		}
	}
}

// The service's own SMTP provider, as under make run: a one-recipient
// message goes in one BDAT chunk (the sink offers CHUNKING), a
// two-recipient one through DATA; both arrive byte for byte.
func TestProviderChunkedAndDataArriveWhole(t *testing.T) {
	s := start(t, Config{})
	p, err := sendsmtp.New(sendsmtp.Config{Addr: s.SMTPAddr(), TLS: sendsmtp.TLSNone})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i, rcpts := range [][]string{{"b@example.com"}, {"b@example.com", "c@example.com"}} {
		msg := "From: a@example.com\r\nTo: b@example.com\r\nSubject: provider " + strings.Repeat("I", i+1) + "\r\n\r\n" +
			".leading dot\r\nnon-ASCII: grüße\r\n" + strings.Repeat("x", 900) + "\r\n.\r\nend\r\n"
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := p.Send(ctx, &email.Message{ID: "m", From: "a@example.com", Recipients: rcpts, Raw: []byte(msg)})
		cancel()
		if err != nil {
			t.Fatalf("send to %v: %v", rcpts, err)
		}
		id := list(t, s, "")[0].ID
		if resp, raw := get(t, s.InboxURL()+"/messages/"+id+".eml"); string(raw) != msg {
			t.Fatalf("to %v: GET %s.eml: %s\n%q\nwant\n%q", rcpts, id, resp.Status, raw, msg)
		}
	}
}

func TestRetentionAndClear(t *testing.T) {
	dir := t.TempDir()
	s := start(t, Config{Dir: dir, MaxMessages: 3})
	for _, subj := range []string{"m1", "m2", "m3", "m4", "m5"} {
		msg := crlf("From: a@example.com\nTo: b@example.com\nSubject: " + subj + "\n\nx\n")
		if err := smtp.SendMail(s.SMTPAddr(), nil, "a@example.com", []string{"b@example.com"}, []byte(msg)); err != nil {
			t.Fatalf("SendMail %s: %v", subj, err)
		}
	}
	subjects := func(ms []Meta) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Subject)
		}
		return out
	}
	got := list(t, s, "")
	if want := []string{"m5", "m4", "m3"}; !slices.Equal(subjects(got), want) {
		t.Fatalf("kept %v, want %v", subjects(got), want)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*.eml")); len(files) != 3 {
		t.Errorf("%d .eml files in the directory, want 3: %v", len(files), files)
	}

	// The index survives a restart on the same directory.
	if err := s.Close(); err != nil { // releases the directory
		t.Fatal(err)
	}
	s2 := start(t, Config{Dir: dir, MaxMessages: 3})
	if got2 := list(t, s2, ""); !slices.Equal(subjects(got2), subjects(got)) {
		t.Errorf("after restart: %v, want %v", subjects(got2), subjects(got))
	}

	req, _ := http.NewRequest(http.MethodDelete, s2.InboxURL()+"/api/messages", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var del struct{ Deleted int }
	_ = json.NewDecoder(resp.Body).Decode(&del)
	resp.Body.Close()
	if resp.StatusCode != 200 || del.Deleted != 3 {
		t.Errorf("DELETE /api/messages: %s, deleted %d, want 3", resp.Status, del.Deleted)
	}
	if n := len(list(t, s2, "")); n != 0 {
		t.Errorf("%d messages after clear", n)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*.eml")); len(files) != 0 {
		t.Errorf(".eml files left after clear: %v", files)
	}
}

func TestMessageSizeBound(t *testing.T) {
	s := start(t, Config{MaxBytes: 4096})
	big := crlf("From: a@example.com\nTo: b@example.com\nSubject: big\n\n") + strings.Repeat("y", 70) + strings.Repeat("\r\n"+strings.Repeat("y", 70), 100) + "\r\n"
	err := smtp.SendMail(s.SMTPAddr(), nil, "a@example.com", []string{"b@example.com"}, []byte(big))
	var te *textproto.Error
	if !errors.As(err, &te) || te.Code != 552 {
		t.Fatalf("oversized message: err %v, want a 552 reply", err)
	}
	small := crlf("From: a@example.com\nTo: b@example.com\nSubject: small\n\nok\n")
	if err := smtp.SendMail(s.SMTPAddr(), nil, "a@example.com", []string{"b@example.com"}, []byte(small)); err != nil {
		t.Fatalf("small message after a refused one: %v", err)
	}
	if got := list(t, s, ""); len(got) != 1 || got[0].Subject != "small" {
		t.Errorf("stored %+v, want only the small message", got)
	}
}

func TestRefusesNonLoopbackHost(t *testing.T) {
	s := start(t, Config{})
	for host, want := range map[string]int{"rebound.example.com": 403, "localhost:1080": 200, "127.0.0.1": 200} {
		req, _ := http.NewRequest(http.MethodGet, s.InboxURL()+"/api/messages", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %s, want %d", host, resp.Status, want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		smtp, http string
		ok         bool
	}{
		{"127.0.0.1:1025", "127.0.0.1:1080", true},
		{"localhost:0", "[::1]:0", true},
		{"0.0.0.0:1025", "127.0.0.1:1080", false},
		{":1025", "127.0.0.1:1080", false},
		{"127.0.0.1:1025", "192.168.1.2:1080", false},
		{"127.0.0.1", "127.0.0.1:1080", false},
	} {
		err := Config{SMTPAddr: tc.smtp, HTTPAddr: tc.http}.WithDefaults().Validate()
		if (err == nil) != tc.ok {
			t.Errorf("smtp %q http %q: err %v, want ok=%v", tc.smtp, tc.http, err, tc.ok)
		}
	}
	if err := (Config{MaxMessages: -1}).WithDefaults().Validate(); err == nil {
		t.Error("MaxMessages -1 accepted")
	}
}

func TestParse(t *testing.T) {
	raw := crlf(`From: a@example.com
Subject: =?ISO-8859-1?Q?Gr=FC=DFe?=
Content-Type: multipart/mixed; boundary=outer

--outer
Content-Type: multipart/alternative; boundary=inner

--inner
Content-Type: text/plain; charset=iso-8859-1
Content-Transfer-Encoding: quoted-printable

Gr=FC=DFe
--inner
Content-Type: text/html; charset=utf-8

<p>hi</p>
--inner--
--outer
Content-Type: text/plain
Content-Disposition: attachment; filename="notes.txt"
Content-Transfer-Encoding: base64

` + base64Std("0123456789") + `
--outer
Content-Type: image/png; name="logo.png"
Content-ID: <logo@x>
Content-Transfer-Encoding: base64

` + base64Std("PNGDATA") + `
--outer--
`)
	c, err := Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if c.Text != "Grüße" || c.HTML != "<p>hi</p>" {
		t.Errorf("text %q html %q", c.Text, c.HTML)
	}
	want := []Attachment{{"notes.txt", "text/plain", "", 10}, {"logo.png", "image/png", "logo@x", 7}}
	if !slices.Equal(c.Attachments, want) {
		t.Errorf("attachments %+v, want %+v", c.Attachments, want)
	}
	if len(c.Headers) != 3 || c.Headers[1] != (HeaderField{"Subject", "Grüße"}) {
		t.Errorf("headers %+v", c.Headers)
	}
	if m := metaOf([]byte(raw)); m.Subject != "Grüße" {
		t.Errorf("meta subject %q", m.Subject)
	}
}
