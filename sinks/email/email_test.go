package email

import (
	"bytes"
	"encoding/base64"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"
)

// part is one decoded leaf of a parsed message.
type part struct {
	ctype, disposition, cid, filename string
	body                              []byte
}

// parse walks a message with the standard library's parsers.
func parse(t *testing.T, raw []byte) (*mail.Message, []string, []part) {
	t.Helper()
	if bytes.Contains(bytes.ReplaceAll(raw, []byte("\r\n"), nil), []byte("\n")) {
		t.Fatal("message has a bare LF")
	}
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("read message: %v", err)
	}
	var structure []string
	var leaves []part
	var walk func(h map[string][]string, body io.Reader, depth int)
	walk = func(h map[string][]string, body io.Reader, depth int) {
		get := func(k string) string {
			if v := h[k]; len(v) > 0 {
				return v[0]
			}
			return ""
		}
		mt, params, err := mime.ParseMediaType(get("Content-Type"))
		if err != nil {
			t.Fatalf("content type %q: %v", get("Content-Type"), err)
		}
		structure = append(structure, strings.Repeat(" ", depth)+mt)
		if strings.HasPrefix(mt, "multipart/") {
			r := multipart.NewReader(body, params["boundary"])
			for {
				p, err := r.NextRawPart()
				if err == io.EOF {
					return
				}
				if err != nil {
					t.Fatalf("multipart: %v", err)
				}
				walk(p.Header, p, depth+1)
			}
		}
		data, _ := io.ReadAll(body)
		switch get("Content-Transfer-Encoding") {
		case "quoted-printable":
			data, _ = io.ReadAll(newQPReader(data))
		case "base64":
			data, _ = io.ReadAll(newB64Reader(data))
		}
		_, dp, _ := mime.ParseMediaType(get("Content-Disposition"))
		disp, _, _ := mime.ParseMediaType(get("Content-Disposition"))
		leaves = append(leaves, part{ctype: mt, disposition: disp, cid: get("Content-Id"), filename: dp["filename"], body: data})
	}
	walk(m.Header, m.Body, 0)
	return m, structure, leaves
}

func TestBuildStructureHeadersAndParts(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nfake image bytes \x00\x01\x02")
	pdf := bytes.Repeat([]byte("%PDF-1.4 some bytes "), 50)
	raw, err := Build(Content{
		MessageID: "abc123@example.com",
		Date:      time.Date(2025, 1, 2, 10, 0, 0, 0, time.UTC),
		From:      Address{Email: "shop@example.com", Name: "Zoë's \"Shop\""},
		To:        "ada@example.org",
		Cc:        []string{"cc1@example.org", "cc2@example.org"},
		ReplyTo:   "help@example.com",
		Subject:   "Your order #42 — thanks, Ada! " + strings.Repeat("long ", 20),
		HTML:      `<p>Hello &lt;Ada&gt;</p><img src="cid:logo">` + strings.Repeat("x", 200) + "\n=end",
		Text:      "Hello <Ada>\n=end",
		Parts: []Part{
			{Filename: "logo.png", ContentID: "logo", Content: png},
			{Filename: "Rechnung ä.pdf", Content: pdf},
		},
		ListUnsubscribe: "https://site.example/unsubscribe/tok",
		Headers:         [][2]string{{"X-Sendstream-Message-Id", "abc123"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, structure, leaves := parse(t, raw)
	want := []string{"multipart/mixed", " multipart/related", "  multipart/alternative", "   text/plain", "   text/html", "  image/png", " application/pdf"}
	if strings.Join(structure, "|") != strings.Join(want, "|") {
		t.Errorf("structure:\n%s\nwant\n%s", strings.Join(structure, "\n"), strings.Join(want, "\n"))
	}
	dec := new(mime.WordDecoder)
	subj, _ := dec.DecodeHeader(m.Header.Get("Subject"))
	if !strings.HasPrefix(subj, "Your order #42 — thanks, Ada! long") {
		t.Errorf("subject decodes to %q", subj)
	}
	from, err := mail.ParseAddress(m.Header.Get("From"))
	if err != nil || from.Name != `Zoë's "Shop"` || from.Address != "shop@example.com" {
		t.Errorf("from %q: %+v %v", m.Header.Get("From"), from, err)
	}
	for h, v := range map[string]string{
		"To": "ada@example.org", "Cc": "cc1@example.org, cc2@example.org", "Reply-To": "help@example.com",
		"Message-Id": "<abc123@example.com>", "Mime-Version": "1.0", "Date": "Thu, 02 Jan 2025 10:00:00 +0000",
		"List-Unsubscribe": "<https://site.example/unsubscribe/tok>", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
		"X-Sendstream-Message-Id": "abc123",
	} {
		if got := m.Header.Get(h); got != v {
			t.Errorf("header %s = %q, want %q", h, got, v)
		}
	}
	for _, line := range strings.Split(string(raw), "\r\n") {
		if len(line) > 998 {
			t.Errorf("line of %d characters", len(line))
		}
	}
	if string(leaves[0].body) != "Hello <Ada>\r\n=end" && string(leaves[0].body) != "Hello <Ada>\n=end" {
		t.Errorf("text part %q", leaves[0].body)
	}
	if !bytes.Contains(leaves[1].body, []byte(`<img src="cid:logo">`)) {
		t.Errorf("html part %q", leaves[1].body)
	}
	if leaves[2].disposition != "inline" || leaves[2].cid != "<logo>" || !bytes.Equal(leaves[2].body, png) {
		t.Errorf("inline image: %+v", leaves[2])
	}
	if leaves[3].disposition != "attachment" || leaves[3].filename != "Rechnung ä.pdf" || !bytes.Equal(leaves[3].body, pdf) {
		t.Errorf("attachment: disp %q name %q size %d", leaves[3].disposition, leaves[3].filename, len(leaves[3].body))
	}
	again, _ := Build(Content{MessageID: "abc123@example.com", Date: time.Date(2025, 1, 2, 10, 0, 0, 0, time.UTC),
		From: Address{Email: "shop@example.com", Name: "Zoë's \"Shop\""}, To: "ada@example.org", Cc: []string{"cc1@example.org", "cc2@example.org"},
		ReplyTo: "help@example.com", Subject: "Your order #42 — thanks, Ada! " + strings.Repeat("long ", 20),
		HTML: `<p>Hello &lt;Ada&gt;</p><img src="cid:logo">` + strings.Repeat("x", 200) + "\n=end", Text: "Hello <Ada>\n=end",
		Parts:           []Part{{Filename: "logo.png", ContentID: "logo", Content: png}, {Filename: "Rechnung ä.pdf", Content: pdf}},
		ListUnsubscribe: "https://site.example/unsubscribe/tok", Headers: [][2]string{{"X-Sendstream-Message-Id", "abc123"}}})
	if !bytes.Equal(raw, again) {
		t.Error("the same content built different bytes")
	}
}

func TestBuildWithoutAttachmentsAndHeaderInjection(t *testing.T) {
	raw, err := Build(Content{MessageID: "x@y", From: Address{Email: "a@b.c"}, To: "d@e.f",
		Subject: "Hi\r\nBcc: victim@evil.test", HTML: "<p>x</p>", Text: "x"})
	if err != nil {
		t.Fatal(err)
	}
	m, structure, _ := parse(t, raw)
	if strings.Join(structure, "|") != "multipart/alternative| text/plain| text/html" {
		t.Errorf("structure %v", structure)
	}
	if m.Header.Get("Bcc") != "" || m.Header.Get("List-Unsubscribe") != "" {
		t.Errorf("unexpected headers: %v", m.Header)
	}
	if _, err := Build(Content{From: Address{Email: "a@b.c"}, To: "d@e.f"}); err == nil {
		t.Error("built a message without a Message-ID")
	}
}

func TestDKIMSignatureVerifies(t *testing.T) {
	privPEM, txt, err := GenerateDKIMKey()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ParseDKIMKey(privPEM)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := Build(Content{MessageID: "m1@shop.example", From: Address{Email: "news@shop.example"}, To: "a@b.example",
		Subject: "Signed", HTML: "<p>hi</p>", Text: "hi", ListUnsubscribe: "https://x.example/u/t"})
	signed, err := Sign(raw, DKIMKey{Domain: "shop.example", Selector: "s1", Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(signed, []byte("DKIM-Signature: ")) {
		t.Fatalf("no DKIM-Signature header first: %q", signed[:60])
	}
	lookup := func(domain string) ([]string, error) {
		if domain != "s1._domainkey.shop.example" {
			t.Errorf("looked up %q", domain)
		}
		return []string{txt}, nil
	}
	vs, err := dkim.VerifyWithOptions(bytes.NewReader(signed), &dkim.VerifyOptions{LookupTXT: lookup})
	if err != nil || len(vs) != 1 || vs[0].Err != nil || vs[0].Domain != "shop.example" {
		t.Fatalf("verify: %v %+v", err, vs)
	}
	for _, h := range []string{"list-unsubscribe", "list-unsubscribe-post", "from", "subject", "message-id"} {
		found := false
		for _, k := range vs[0].HeaderKeys {
			found = found || strings.EqualFold(k, h)
		}
		if !found {
			t.Errorf("header %s not signed (signed: %v)", h, vs[0].HeaderKeys)
		}
	}
	tampered := bytes.Replace(signed, []byte("Subject: Signed"), []byte("Subject: Changed"), 1)
	vs, _ = dkim.VerifyWithOptions(bytes.NewReader(tampered), &dkim.VerifyOptions{LookupTXT: lookup})
	if len(vs) != 1 || vs[0].Err == nil {
		t.Error("a changed subject still verifies")
	}
}

func TestUnsubscribeTokens(t *testing.T) {
	u := Unsubscribe{Workspace: "w1", Email: "a@b.c", ContactID: "c1", MessageID: "m1"}
	tok := SignUnsubscribe("s3cret", u)
	got, err := VerifyUnsubscribe("s3cret", tok)
	if err != nil || got != u {
		t.Fatalf("verify: %+v %v", got, err)
	}
	if _, err := VerifyUnsubscribe("other", tok); err != ErrBadToken {
		t.Error("a token verified under another secret")
	}
	b, s, _ := strings.Cut(tok, ".")
	forged := SignUnsubscribe("s3cret", Unsubscribe{Workspace: "w2", Email: "a@b.c"})
	fb, _, _ := strings.Cut(forged, ".")
	for _, bad := range []string{"", "x", b + ".", "." + s, fb + "." + s, b + "." + s[:len(s)-2] + "AA"} {
		if _, err := VerifyUnsubscribe("s3cret", bad); err != ErrBadToken {
			t.Errorf("token %q verified", bad)
		}
	}
	if url := UnsubscribeURL("http://h:8080/", "s3cret", u); url != "http://h:8080/unsubscribe/"+tok {
		t.Errorf("url %q", url)
	}
}

func TestPreheaderAndFooter(t *testing.T) {
	h := InsertPreheader(`<html><BODY class="x"><p>a</p></body></html>`, `Your <order>`)
	if !strings.Contains(h, `<BODY class="x"><div style="display:none`) || !strings.Contains(h, "Your &lt;order&gt;</div><p>a</p>") {
		t.Errorf("preheader: %s", h)
	}
	if got := InsertPreheader("<p>a</p>", "pre"); !strings.HasPrefix(got, "<div") {
		t.Errorf("preheader without body: %s", got)
	}
	f := AppendFooter("<html><body><p>a</p></body></html>", "<footer>f</footer>")
	if f != "<html><body><p>a</p><footer>f</footer></body></html>" {
		t.Errorf("footer: %s", f)
	}
}

func newQPReader(b []byte) io.Reader { return quotedprintable.NewReader(bytes.NewReader(b)) }
func newB64Reader(b []byte) io.Reader {
	return base64.NewDecoder(base64.StdEncoding, bytes.NewReader(b))
}
