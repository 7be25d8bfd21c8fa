package schemas

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// sampleSendPayloads are a minimal, a spilled, a full and an awkward payload.
func sampleSendPayloads() []SendPayload {
	at := time.Date(2026, 11, 22, 9, 1, 2, 345678900, time.UTC)
	return []SendPayload{
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
	}
}

// TestAppendSendPayloadMatchesJSONMarshal compares the hand encoder with
// json.Marshal on the sample payloads.
func TestAppendSendPayloadMatchesJSONMarshal(t *testing.T) {
	at := time.Date(2026, 11, 22, 9, 1, 2, 345678900, time.UTC)
	for _, p := range sampleSendPayloads() {
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendSendPayload([]byte("prefix"), &p)
		if err != nil || !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("AppendSendPayload:\n got %s, %v\nwant prefix%s", got, err, want)
		}
	}
	// With the HTML encoded beforehand, the same bytes.
	for _, p := range sampleSendPayloads() {
		want, _ := AppendSendPayload(nil, &p)
		p.HTMLJSON = AppendJSONString(nil, p.HTML)
		if got, err := AppendSendPayload(nil, &p); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("with HTMLJSON:\n got %s, %v\nwant %s", got, err, want)
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

// TestDecodeSendPayloadMatchesEncodingJSON: the sample payloads, as both
// encoders write them, decode as json.Unmarshal decodes them; malformed
// payloads are refused.
func TestDecodeSendPayloadMatchesEncodingJSON(t *testing.T) {
	for _, p := range sampleSendPayloads() {
		b, err := AppendSendPayload(nil, &p)
		if err != nil {
			t.Fatal(err)
		}
		checkDecodeSendPayload(t, b)
	}
	checkDecodeSendPayload(t, []byte(` { "html" : "a\u00e9\ud83d\ude00\"" , "extra": [1, {"k": null}], "to": null, "data": null,
		"spilled": true, "templateVersion": 3, "acceptedAt": "2026-01-02T03:04:05+01:00" } `))
	for _, bad := range []string{``, `[]`, `{"to":1}`, `{"html":"x"`, `{"html":"x",}`, `{"acceptedAt":"soon"}`,
		`{"data":{"a":}}`, `{"html":"a\qb"}`, "{\"html\":\"a\x01\"}", `{"cc":"x"}`, `{"to":"x"} x`} {
		if _, err := DecodeSendPayload([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func checkDecodeSendPayload(t *testing.T, b []byte) {
	t.Helper()
	got, err := DecodeSendPayload(b)
	if err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	var want SendPayload
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v\nencoding/json %+v", got, want)
	}
}

// FuzzDecodeSendPayload varies the strings and the data of an encoded
// payload; and any string literal that unquote decodes, encoding/json
// decodes alike.
func FuzzDecodeSendPayload(f *testing.F) {
	f.Add("to@x.test", "<p>hi</p>\n\t\"q\"", []byte(`{"a":1}`))
	f.Add("\xff\u2028", "a\"b\\c/\b\f\r", []byte(` [ 1 , 2 ] `))
	f.Fuzz(func(t *testing.T, s, html string, data []byte) {
		p := SendPayload{MessageID: s, To: s, HTML: html, Text: s + html, Cc: []string{s}, Data: data,
			AcceptedAt: time.Unix(1e9, 5).UTC(), Contact: &RecipientContact{Email: s, CustomFields: map[string]any{s: html}}}
		if b, err := json.Marshal(p); err == nil {
			checkDecodeSendPayload(t, b)
		}
		lit := []byte(`"` + s + `"`)
		if got, ok := unquote(lit); ok {
			var want string
			if err := json.Unmarshal(lit, &want); err != nil || got != want {
				t.Fatalf("unquote(%q) = %q; json.Unmarshal gives %q, %v", lit, got, want, err)
			}
		}
	})
}

func BenchmarkDecodeSendPayload(b *testing.B) {
	p := sampleSendPayloads()[2]
	p.HTML = strings.Repeat("<p style=\"font-size:16px;color:#51545e;\">Thanks {{ name }} for order {{ order.number }}.</p>\n", 40)
	p.Attachments = nil
	data, _ := json.Marshal(p)
	b.Run("hand", func(b *testing.B) {
		for b.Loop() {
			if _, err := DecodeSendPayload(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		sources := NewSourceCache(1<<20, false)
		for b.Loop() {
			if _, err := DecodeSendPayloadCached(data, "ws", sources); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			var q SendPayload
			if err := json.Unmarshal(data, &q); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzDecodeSendPayloadRefusesInvalidJSON: whatever DecodeSendPayload
// accepts is valid JSON, so the delivery stage may take envelopes' payloads
// unchecked (pipeline.Spec.UncheckedPayload); DecodeSendPayloadCached
// decodes and refuses alike, whether a source was kept or not. Its seeds
// run as a test.
func FuzzDecodeSendPayloadRefusesInvalidJSON(f *testing.F) {
	long := strings.Repeat("<p class=\"x\">Hi {{ name }} & \u2028 é</p>\n", 20)
	for i, p := range sampleSendPayloads() {
		if i%2 == 0 {
			p.HTML, p.Text = long, long+"."
		}
		b, err := json.Marshal(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	sources := NewSourceCache(1<<20, false)
	for _, s := range []string{
		`{"x":"a` + "\x01" + `b"}`, `{"x":"\q"}`, `{"x` + "\n" + `":1}`, `{"\u00zz":1}`, `{"data":"\x"}`,
		`{"policy":{"other":"` + "\t" + `"}}`, `{"to":"a","x":[1,}`, `{"x":"ok"} x`, `{"html":"\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want, err := DecodeSendPayload(b)
		if err == nil && !json.Valid(b) {
			t.Fatalf("DecodeSendPayload accepted invalid JSON %q", b)
		}
		for i := 0; i < 2; i++ { // the second time from the cache
			got, cerr := DecodeSendPayloadCached(b, "ws", sources)
			if (cerr == nil) != (err == nil) || !reflect.DeepEqual(got, want) {
				t.Fatalf("DecodeSendPayloadCached(%q) #%d = %+v, %v; DecodeSendPayload gives %+v, %v", b, i, got, cerr, want, err)
			}
		}
	})
}
