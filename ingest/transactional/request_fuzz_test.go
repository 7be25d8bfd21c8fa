package transactional

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"sendstream/ingest/contacts"
	"sendstream/sinks/email/render"
)

var fuzzSendSeeds = []string{
	`{"to":"Ann@Example.com","subject":"Hi {{ name }}","htmlContent":"<p>Hi</p>","data":{"name":"Ann","o":{"i":[1,2]}},"externalId":"x-1","strict":true,"language":"de","sendPolicy":"news","replyTo":"r@example.com","fromEmail":"f@example.com","cc":["c1@example.com","C1@example.com"],"bcc":"b@example.com","contact":{"email":"ann@example.com","firstName":"Ann","country":null,"customFields":{"plan":"pro"}},"attachments":[{"filename":"a.txt","content":"aGVsbG8=","contentType":"text/plain","contentId":"logo"}]}`,
	`{"to":"a@example.com","templateId":"t1"}`,
	`{"to":"a@example.com","subject":"","htmlContent":"x"}`,
	`{"to":"a@exämple.com","subject":"é","htmlContent":"x","externalId":""}`,
	`{"to":5,"subject":[],"htmlContent":{},"data":[],"strict":"yes","cc":[1],"attachments":[{"filename":"../x","content":"!!"}]}`,
	`{"to":"a@example.com","subject":"s","htmlContent":"x","data":{"a":{"a":{"a":{}}}},"cc":"not-an-address"}`,
	`{"to":"a@example.com","subject":"s","htmlContent":"x","attachments":[{"filename":"a","content":"aGk=","contentId":"x y"}]}`,
	`{"to":"a@example.com","subject":"s\u0000","htmlContent":"\ud800"}`,
	`[]`, `{}`, `null`, `{"to":"a@example.com"`,
}

// FuzzParseSend: parseSend never panics on a JSON body (the server checks
// the syntax first), names every failing field once, and an accepted send
// keeps every documented limit, agrees with encoding/json on its text
// fields, and parses to the same request again when written back as JSON
// (parse(encode(x)) == x).
func FuzzParseSend(f *testing.F) {
	for _, s := range fuzzSendSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) {
			return
		}
		r, errs := parseSend(body, nil, "ws")
		if !errs.empty() {
			seen := map[string]bool{}
			for _, f := range errs.fields {
				if f == "" || seen[f] {
					t.Fatalf("fields %q of %q: empty or repeated", errs.fields, body)
				}
				seen[f] = true
			}
			return
		}
		if r == nil {
			t.Fatalf("accepted %q without a request", body)
		}
		checkSend(t, body, r)
		again, errs := parseSend(encodeSend(t, r), nil, "ws")
		if !errs.empty() {
			t.Fatalf("%q accepted, its encoding %s refused: %v", body, encodeSend(t, r), errs.fields)
		}
		canonical(r)
		canonical(again)
		if !reflect.DeepEqual(r, again) {
			t.Fatalf("parse(encode(x)) != x:\n%+v\n%+v", r, again)
		}
	})
}

// checkSend asserts the documented limits of an accepted send.
func checkSend(t *testing.T, body []byte, r *sendRequest) {
	t.Helper()
	normal := func(what, addr string) {
		if n, err := contacts.NormalizeEmail(addr); err != nil || n != addr {
			t.Fatalf("%s %q accepted (normalised %q, %v)", what, addr, n, err)
		}
	}
	normal("to", r.To)
	for _, a := range append(slices.Clone(r.Cc), r.Bcc...) {
		normal("cc/bcc", a)
	}
	if len(r.Cc) > MaxCopies || len(r.Bcc) > MaxCopies {
		t.Fatalf("%d cc, %d bcc accepted", len(r.Cc), len(r.Bcc))
	}
	for _, a := range []string{r.ReplyTo, r.FromEmail} {
		if a != "" {
			normal("replyTo/fromEmail", a)
		}
	}
	if !r.HasHTML && r.TemplateID == "" || r.HasHTML && strings.TrimSpace(r.Subject) == "" {
		t.Fatalf("accepted without content or subject: %q", body)
	}
	if utf8.RuneCountInString(r.ExternalID) > MaxExternalID {
		t.Fatalf("an externalId of %d characters accepted", utf8.RuneCountInString(r.ExternalID))
	}
	if r.DataRaw != nil && (!json.Valid(r.DataRaw) || r.DataRaw[0] != '{' || len(r.DataRaw) > MaxDataBytes || render.DataDepth(r.DataRaw) > MaxDataDepth) {
		t.Fatalf("data %.200q accepted", r.DataRaw)
	}
	total := 0
	for _, a := range r.Attachments {
		total += len(a.Content)
		if strings.TrimSpace(a.Filename) == "" || strings.ContainsAny(a.Filename, "/\\\r\n\x00") || len(a.Content) > MaxAttachmentBytes || a.ContentType == "" {
			t.Fatalf("attachment %q (%d bytes, %q) accepted", a.Filename, len(a.Content), a.ContentType)
		}
	}
	if len(r.Attachments) > MaxAttachments || total > MaxAttachmentTotal {
		t.Fatalf("%d attachments of %d bytes accepted", len(r.Attachments), total)
	}
	// The text fields read what encoding/json reads, where the text is
	// valid (the server refuses invalid UTF-8 and lone surrogates first).
	if !utf8.Valid(body) || bytes.Contains(bytes.ToLower(body), []byte(`\ud`)) {
		return
	}
	var std struct {
		Subject, TemplateID, HTMLContent, ExternalID, Language, SendPolicy string
	}
	if err := json.Unmarshal(body, &std); err != nil {
		return // a member of another type that parseSend reads as absent (null)
	}
	got := [...]string{r.Subject, r.TemplateID, r.HTMLContent, r.ExternalID, r.Language, r.SendPolicy}
	want := [...]string{std.Subject, std.TemplateID, std.HTMLContent, std.ExternalID, std.Language, std.SendPolicy}
	if got != want {
		t.Fatalf("text fields of %q: %q, encoding/json %q", body, got, want)
	}
}

// canonical rewrites the raw JSON a request keeps (data, custom field
// values) in one form, and drops the cache's copy of the HTML, so two
// requests compare by meaning.
func canonical(r *sendRequest) {
	r.htmlJSON = nil
	canon := func(raw []byte) json.RawMessage {
		var v any
		if json.Unmarshal(raw, &v) != nil {
			return raw
		}
		b, _ := json.Marshal(v)
		return b
	}
	if r.DataRaw != nil {
		r.DataRaw = canon(r.DataRaw)
	}
	if r.Contact != nil {
		for k, v := range r.Contact.CustomFields {
			r.Contact.CustomFields[k] = canon(v)
		}
	}
}

// encodeSend writes an accepted request back as a send body.
func encodeSend(t *testing.T, r *sendRequest) []byte {
	t.Helper()
	m := map[string]any{"to": r.To, "strict": r.Strict}
	for k, v := range map[string]string{"subject": r.Subject, "templateId": r.TemplateID, "externalId": r.ExternalID,
		"language": r.Language, "sendPolicy": r.SendPolicy, "replyTo": r.ReplyTo, "fromEmail": r.FromEmail} {
		if v != "" {
			m[k] = v
		}
	}
	if r.HasHTML {
		m["htmlContent"] = r.HTMLContent
	}
	if r.DataRaw != nil {
		m["data"] = r.DataRaw
	}
	if r.Cc != nil {
		m["cc"] = r.Cc
	}
	if r.Bcc != nil {
		m["bcc"] = r.Bcc
	}
	if c := r.Contact; c != nil {
		cm := map[string]any{"firstName": c.FirstName, "country": c.Country, "language": c.Language}
		if c.CustomFields != nil {
			cm["customFields"] = c.CustomFields
		}
		m["contact"] = cm
	}
	if r.Attachments != nil {
		var list []any
		for _, a := range r.Attachments {
			list = append(list, map[string]any{"filename": a.Filename, "contentType": a.ContentType, "contentId": a.ContentID,
				"content": base64.StdEncoding.EncodeToString(a.Content)})
		}
		m["attachments"] = list
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("encode %+v: %v", r, err)
	}
	return b
}

// FuzzCheckSNSURL: a URL CheckSNSURL accepts is https on an SNS host, and
// the host an HTTP client dials for it is that host (no user info, port
// tricks or second authority), so a forged certificate or subscription URL
// cannot make the server fetch from elsewhere.
func FuzzCheckSNSURL(f *testing.F) {
	for _, s := range []string{
		"https://sns.us-east-1.amazonaws.com/SimpleNotificationService-abc.pem",
		"https://sns.cn-north-1.amazonaws.com.cn/x.pem",
		"https://sns.us-east-1.amazonaws.com:443/x",
		"https://sns.us-east-1.amazonaws.com.evil.com/x",
		"https://evil.com@sns.us-east-1.amazonaws.com/x",
		"https://sns.us-east-1.amazonaws.com\\@evil.com/x",
		"http://sns.us-east-1.amazonaws.com/x",
		"https://SNS.us-east-1.amazonaws.com/x",
		"https://sns.us-east-1.amazonaws.com%2eevil.com/x",
		"//sns.us-east-1.amazonaws.com/x", "", "https://",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		if CheckSNSURL(u) != nil {
			return
		}
		p, err := url.Parse(u)
		if err != nil || p.Scheme != "https" || p.User != nil || p.Opaque != "" {
			t.Fatalf("accepted %q: %+v %v", u, p, err)
		}
		host := p.Hostname()
		if !strings.HasPrefix(host, "sns.") || !(strings.HasSuffix(host, ".amazonaws.com") || strings.HasSuffix(host, ".amazonaws.com.cn")) ||
			strings.ContainsAny(host, "@\\/%:[] ") || (p.Port() != "" && p.Port() != "443") {
			t.Fatalf("accepted %q, which dials %q port %q", u, host, p.Port())
		}
	})
}
