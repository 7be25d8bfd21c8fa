package email

import (
	"bytes"
	"mime"
	"net/mail"
	"strings"
	"testing"
	"time"
)

// TestBuildHeadersStayASCII: display names, subjects and attachment names
// are RFC 2047 / RFC 2231-encoded, so a message to ASCII addresses has a
// pure US-ASCII header section (no SMTPUTF8 needed) whatever its text;
// only a non-ASCII address itself puts UTF-8 into a header (RFC 6532), and
// that message says it needs SMTPUTF8.
func TestBuildHeadersStayASCII(t *testing.T) {
	c := Content{
		MessageID: "m1@x.test", Date: time.Unix(0, 0), To: "to@y.test", ReplyTo: "reply@y.test",
		From:    Address{Email: "from@x.test", Name: "Jürgen \"JJ\" Müller, Ltd. \u202e"},
		Subject: "Grüße — " + strings.Repeat("ünïcödé ", 20) + "\u202eevil",
		HTML:    "<p>ü</p>", Text: "ü",
		Parts: []Part{{Filename: "résumé.pdf", Content: []byte("x")}},
	}
	raw, err := Build(c)
	if err != nil {
		t.Fatal(err)
	}
	head := raw[:bytes.Index(raw, []byte("\r\n\r\n"))]
	for i, b := range head {
		if b >= 0x80 {
			t.Fatalf("raw UTF-8 in the header at %d: %q", i, head)
		}
	}
	for _, line := range bytes.Split(head, []byte("\r\n")) {
		if len(line) > 998 {
			t.Fatalf("header line of %d octets", len(line))
		}
	}
	m := &Message{From: c.From.Email, Recipients: []string{c.To}, Raw: raw}
	if m.NeedsSMTPUTF8() {
		t.Error("an all-ASCII envelope and header needs SMTPUTF8")
	}
	parsed, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	dec := new(mime.WordDecoder)
	subject, err := dec.DecodeHeader(parsed.Header.Get("Subject"))
	if err != nil || subject != c.Subject {
		t.Errorf("subject decodes to %q, %v", subject, err)
	}
	from, err := (&mail.AddressParser{WordDecoder: dec}).Parse(parsed.Header.Get("From"))
	if err != nil || from.Name != c.From.Name || from.Address != c.From.Email {
		t.Errorf("from decodes to %+v, %v", from, err)
	}

	c.To = "jürgen@xn--exmple-cua.test"
	raw, err = Build(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("\r\nTo: jürgen@xn--exmple-cua.test\r\n")) {
		t.Errorf("the UTF-8 address is not in the To header as is: %q", raw)
	}
	m = &Message{From: c.From.Email, Recipients: []string{c.To}, Raw: raw}
	if !m.NeedsSMTPUTF8() {
		t.Error("a non-ASCII recipient does not need SMTPUTF8")
	}
}
