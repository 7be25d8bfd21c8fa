package schemas

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestAppendSendPayloadMatchesJSONMarshal compares the hand encoder with
// json.Marshal on a minimal, a full and an awkward payload.
func TestAppendSendPayloadMatchesJSONMarshal(t *testing.T) {
	at := time.Date(2026, 11, 22, 9, 1, 2, 345678900, time.UTC)
	for _, p := range []SendPayload{
		{AcceptedAt: at},
		{MessageID: "m1", RFCMessageID: "m1@x.test", Spilled: true, AcceptedAt: at.In(time.FixedZone("x", 3600))},
		{
			MessageID: "m2", RFCMessageID: "m2@x.test", ExternalID: "ext <1>", WorkspaceName: "Acme & Co",
			From: Address{Email: "from@x.test", Name: "Zoë \"Q\""}, To: "to@x.test", Cc: []string{"c1@x.test", "c2@x.test"},
			Bcc: []string{}, ReplyTo: "r@x.test", Policy: PolicyRef{ID: "p", Key: "k", Kind: PolicyMarketing, Provider: "smtp"},
			TemplateID: "t", TemplateVersion: 7, Language: "de", Subject: "Hi {{ name }}", Preheader: "pre\u2028",
			HTML: strings.Repeat(`<p style="a">x & y</p>`, 50) + "\xff", Text: "line\nline\t\x01",
			Data: json.RawMessage(` { "a" : [1, "<b>"], "n": null } `),
			Contact: &RecipientContact{ID: "c", Email: "to@x.test", FirstName: "Ada", Status: "ACTIVE",
				CustomFields: map[string]any{"z": 1, "a": "<x>", "m": []any{true, nil}}},
			Attachments: []Attachment{{Filename: "a.pdf", ContentType: "application/pdf", Content: []byte("%PDF-1.4 \x00\xff")},
				{Filename: "i.png", ContentType: "image/png", ContentID: "logo", Content: []byte{}}, {Filename: "n", ContentType: "x/y"}},
			AcceptedAt: at,
		},
		{Contact: &RecipientContact{Email: "e@x.test", CustomFields: map[string]any{}}, Data: json.RawMessage(`{}`), AcceptedAt: at},
	} {
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendSendPayload([]byte("prefix"), &p)
		if err != nil || !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("AppendSendPayload:\n got %s, %v\nwant prefix%s", got, err, want)
		}
	}
	bad := SendPayload{AcceptedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := AppendSendPayload(nil, &bad); err == nil {
		t.Error("a year past 9999 encoded; json.Marshal refuses it")
	}
	bad = SendPayload{Data: json.RawMessage(`{"a":`), AcceptedAt: at}
	if _, err := AppendSendPayload(nil, &bad); err == nil {
		t.Error("invalid data encoded; json.Marshal refuses it")
	}
}

// FuzzAppendSendPayload varies the strings and the data of a payload.
func FuzzAppendSendPayload(f *testing.F) {
	f.Add("to@x.test", "<p>hi</p>", []byte(`{"a":1}`))
	f.Add("\xff\u2028", "a\"b\\c", []byte(` [ 1 , 2 ] `))
	f.Fuzz(func(t *testing.T, s, html string, data []byte) {
		p := SendPayload{MessageID: s, To: s, HTML: html, Cc: []string{s}, Data: data, AcceptedAt: time.Unix(1e9, 5).UTC(),
			Contact: &RecipientContact{Email: s, CustomFields: map[string]any{s: html}}}
		want, werr := json.Marshal(p)
		got, gerr := AppendSendPayload(nil, &p)
		if (werr == nil) != (gerr == nil) || werr == nil && !bytes.Equal(got, want) {
			t.Fatalf("AppendSendPayload = %s, %v; json.Marshal = %s, %v", got, gerr, want, werr)
		}
	})
}

func BenchmarkAppendSendPayload(b *testing.B) {
	p := SendPayload{MessageID: "m1", RFCMessageID: "m1@x.test", From: Address{Email: "f@x.test"}, To: "t@x.test",
		Policy: PolicyRef{ID: "p", Key: "k", Kind: "transactional", Provider: "smtp"}, Subject: "Your order {{ order.number }}",
		HTML:       strings.Repeat(`<p style="font-size:16px;color:#51545e;">Thanks {{ name }} for order {{ order.number }}.</p>`, 22),
		Data:       json.RawMessage(`{"name":"Ada","order":{"number":"100001","items":[{"name":"Green tea","quantity":2}]}}`),
		AcceptedAt: time.Now().UTC()}
	b.Run("hand", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf, _ = AppendSendPayload(buf[:0], &p)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(p)
		}
	})
}
