package schemas

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// sampleEnvelope is a request-log envelope as ingest publishes it.
func sampleEnvelope() Envelope {
	at := time.Date(2026, 11, 22, 3, 34, 24, 990963999, time.UTC)
	return Envelope{
		ID: "01a20151c1deb5cae77c34403f677b5e", Workspace: "01a20150c05507dc7b35742795ea3a47",
		Type: TypeRequestLogged, Key: "01a20150c05507dc7b35742795ea3a47", OccurredAt: at,
		Payload: json.RawMessage(`{"at":"2026-11-22T03:34:24.990963999Z","method":"GET","path":"/api/v1/me","status":200,"durationUs":14,"keyId":"01a20150c056c4959c8f585a54ee99e7","keyKind":"api_key","responseBody":"{\"workspace\":{\"id\":\"01a20150c05507dc7b35742795ea3a47\",\"name\":\"bench\",\"plan\":\"enterprise\"},\"key\":{\"id\":\"01a20150c056c4959c8f585a54ee99e7\",\"kind\":\"api_key\",\"scopes\":[],\"fullAccess\":true}}","produced":{},"ip":"127.0.0.1"}`),
	}
}

func checkAppend(t *testing.T, env Envelope) {
	t.Helper()
	want, werr := json.Marshal(&env)
	prefix := []byte("prefix")
	got, gerr := AppendEnvelope(append([]byte(nil), prefix...), &env)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("error mismatch: json %v, AppendEnvelope %v (env %+v)", werr, gerr, env)
	}
	if !bytes.HasPrefix(got, prefix) {
		t.Fatalf("AppendEnvelope lost dst's contents: %q", got)
	}
	got = got[len(prefix):]
	if werr != nil {
		if len(got) != 0 {
			t.Fatalf("AppendEnvelope extended dst on error: %q", got)
		}
		return
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("AppendEnvelope\n got %s\nwant %s", got, want)
	}
}

func TestAppendEnvelopeMatchesEncodingJSON(t *testing.T) {
	base := sampleEnvelope()
	cases := map[string]func(e *Envelope){
		"request log": func(e *Envelope) {},
		"all fields": func(e *Envelope) {
			e.CausationID, e.Traceparent, e.Attempt = "parent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", 3
		},
		"negative attempt": func(e *Envelope) { e.Attempt = -7 },
		"nil payload":      func(e *Envelope) { e.Payload = nil },
		"empty payload":    func(e *Envelope) { e.Payload = json.RawMessage{} },
		"invalid payload":  func(e *Envelope) { e.Payload = json.RawMessage(`{"a":}`) },
		"trailing garbage": func(e *Envelope) { e.Payload = json.RawMessage(`{} x`) },
		"two values":       func(e *Envelope) { e.Payload = json.RawMessage(`1 2`) },
		"spaced payload":   func(e *Envelope) { e.Payload = json.RawMessage(" {\"a\" : [1, 2,\n3] }\t") },
		"html in payload":  func(e *Envelope) { e.Payload = json.RawMessage(`{"html":"<b>&amp;</b>"}`) },
		"u2028 in payload": func(e *Envelope) { e.Payload = json.RawMessage("\"a\u2028b\u2029c\"") },
		"scalar payloads":  func(e *Envelope) { e.Payload = json.RawMessage(`-12.5e+3`) },
		"literal payload":  func(e *Envelope) { e.Payload = json.RawMessage(`true`) },
		"invalid utf8 raw": func(e *Envelope) { e.Payload = json.RawMessage("\"\xff\xfe\"") },
		"escapes in raw":   func(e *Envelope) { e.Payload = json.RawMessage(`"\u00e9\n\"\\\/"`) },
		"bad escape raw":   func(e *Envelope) { e.Payload = json.RawMessage(`"\x"`) },
		"control in raw":   func(e *Envelope) { e.Payload = json.RawMessage("\"a\tb\"") },
		"leading zero":     func(e *Envelope) { e.Payload = json.RawMessage(`01`) },
		"html in strings":  func(e *Envelope) { e.ID, e.Key = "<script>&", "a>b" },
		"escaped strings":  func(e *Envelope) { e.Type = "q\"b\\s\n\r\t\b\f\x01\x1f" },
		"unicode strings":  func(e *Envelope) { e.Workspace = "héllo ☃ \U0001F600" },
		"invalid utf8":     func(e *Envelope) { e.Key = "a\xffb\xc3" },
		"u2028 strings":    func(e *Envelope) { e.Traceparent = "x\u2028y\u2029z" },
		"other zone":       func(e *Envelope) { e.OccurredAt = time.Date(2020, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 5*3600+1800)) },
		"whole seconds":    func(e *Envelope) { e.OccurredAt = time.Unix(1700000000, 0).UTC() },
		"zero time":        func(e *Envelope) { e.OccurredAt = time.Time{} },
		"year 10000":       func(e *Envelope) { e.OccurredAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
		"negative year":    func(e *Envelope) { e.OccurredAt = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) },
		"deep payload":     func(e *Envelope) { e.Payload = json.RawMessage(strings.Repeat("[", 600) + strings.Repeat("]", 600)) },
		"empty containers": func(e *Envelope) { e.Payload = json.RawMessage(`{"a":[],"b":{},"c":[{}],"d":null}`) },
		"unclosed":         func(e *Envelope) { e.Payload = json.RawMessage(`{"a":[1,2}`) },
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			env := base
			mod(&env)
			checkAppend(t, env)
		})
	}
}

func checkDecode(t *testing.T, data []byte, init Envelope) {
	t.Helper()
	want := init
	want.Payload = append(json.RawMessage(nil), init.Payload...)
	werr := json.Unmarshal(data, &want)
	got := init
	gerr := DecodeEnvelope(data, &got)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("error mismatch for %q: json %v, DecodeEnvelope %v", data, werr, gerr)
	}
	if werr != nil {
		return // the fields set before an error are encoding/json's business
	}
	if !bytes.Equal(got.Payload, want.Payload) || (got.Payload == nil) != (want.Payload == nil) {
		t.Fatalf("payload for %q: got %q, want %q", data, got.Payload, want.Payload)
	}
	// A promise of compactness only where json.Marshal keeps the payload
	// as is (a payload decoded by encoding/json gets none).
	if got.PayloadCompact && (got.Payload == nil || !isClean(got.Payload)) {
		t.Fatalf("decode %q: PayloadCompact for payload %q", data, got.Payload)
	}
	got.Payload, want.Payload = nil, nil
	got.PayloadCompact, want.PayloadCompact = false, false
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decode %q:\n got %#v\nwant %#v", data, got, want)
	}
	checkUnchecked(t, data, init)
}

// checkUnchecked: DecodeEnvelopeUnchecked accepts whatever DecodeEnvelope
// accepts, and whenever its payload is valid JSON (what a strict payload
// parser accepts) the envelope is exactly DecodeEnvelope's.
func checkUnchecked(t *testing.T, data []byte, init Envelope) {
	t.Helper()
	want := init
	werr := DecodeEnvelope(data, &want)
	got := init
	gerr := DecodeEnvelopeUnchecked(data, &got)
	switch {
	case gerr != nil && werr == nil:
		t.Fatalf("unchecked refused %q: %v", data, gerr)
	case gerr != nil || (got.Payload != nil && !json.Valid(got.Payload)):
		return // refused, or left for the payload parser to refuse
	case werr != nil:
		t.Fatalf("unchecked took %q with a valid payload %q; DecodeEnvelope: %v", data, got.Payload, werr)
	}
	if got.PayloadCompact && !isClean(got.Payload) {
		t.Fatalf("unchecked decode %q promised a compact payload %q", data, got.Payload)
	}
	got.PayloadCompact, want.PayloadCompact = false, false
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("unchecked decode %q:\n got %#v\nwant %#v", data, got, want)
	}
}

func TestDecodeEnvelopeMatchesEncodingJSON(t *testing.T) {
	enc, err := json.Marshal(sampleEnvelope())
	if err != nil {
		t.Fatal(err)
	}
	inputs := []string{
		string(enc),
		`{}`,
		`null`,
		`[]`,
		`"x"`,
		` {"id":"a"} `,
		`{"id":"a","id":"b"}`,
		`{"ID":"upper","Workspace":"w"}`,
		`{"id":"a","ID":"b"}`,
		`{"id":null,"attempt":null,"occurredAt":null,"payload":null}`,
		`{"id":"a\"b","type":"\u00e9"}`,
		`{"id":"\ud800"}`,
		"{\"id\":\"\xff\"}",
		`{"id":"é☃"}`,
		`{"attempt":1.5}`,
		`{"attempt":1e2}`,
		`{"attempt":-0}`,
		`{"attempt":01}`,
		`{"attempt":99999999999999999999}`,
		`{"attempt":"1"}`,
		`{"attempt":-9223372036854775808}`,
		`{"occurredAt":"2026-11-22T03:34:24Z"}`,
		`{"occurredAt":"2026-11-22T03:34:24.123+05:30"}`,
		`{"occurredAt":"2026-11-22 03:34:24Z"}`,
		`{"occurredAt":"2026-11-22T03:34:24.Z"}`,
		`{"occurredAt":"2026-11-22T24:00:00Z"}`,
		`{"occurredAt":12}`,
		`{"payload": {"a" : 1} }`,
		`{"payload":{"a" : [1, 2]}}`,
		`{"payload":"str"}`,
		`{"payload":12.5}`,
		`{"payload":[1,2,{"x":"<&>"}]}`,
		`{"payload":{"a":}}`,
		`{"payload":{"a":1}`,
		`{"payload":{"a":1}}x`,
		`{"unknown":{"deep":[1,2,3]},"id":"z"}`,
		`{"unknown":1,}`,
		`{"id":"a",}`,
		`{"id" :"a"}`,
		`{"id":"a"} `,
		`{"id":"a" }`,
		"{\"id\":\"a\tb\"}",
		`{"causationId":"c","traceparent":"t","key":"k","workspace":"k"}`,
		`{"key":"same","workspace":"same"}`,
		`{"payload":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`,
		``,
		`{`,
		`{"`,
		`{"id"`,
		`{"id":`,
		`{"id":"`,
		`{"attempt":-}`,
		`{"attempt":}`,
		// Every member before a final payload: the unchecked shortcut.
		`{"id":"i","workspace":"w","type":"t","key":"k","occurredAt":"2026-11-22T03:34:24Z","attempt":0,"payload":{"a":[1,"}"]}}`,
		`{"id":"i","workspace":"w","type":"t","key":"k","occurredAt":"2026-11-22T03:34:24Z","attempt":0,"payload":{"a":1},"traceparent":"x"}`,
		`{"id":"i","workspace":"w","type":"t","key":"k","occurredAt":"2026-11-22T03:34:24Z","attempt":0,"payload":{"a":1},"id":"j"}`,
		`{"id":"i","workspace":"w","type":"t","key":"k","occurredAt":"2026-11-22T03:34:24Z","attempt":0,"payload":{"a":}}`,
		`{"id":"i","workspace":"w","type":"t","key":"k","occurredAt":"2026-11-22T03:34:24Z","attempt":0,"payload":1 }`,
		`{"id":"i","workspace":"w","type":"t","key":"k","occurredAt":"2026-11-22T03:34:24Z","attempt":0,"payload": 1}`,
		`{"id":"i","workspace":"w","type":"t","key":"k","occurredAt":"2026-11-22T03:34:24Z","attempt":0,"payload":}`,
	}
	inits := []Envelope{{}, sampleEnvelope()}
	for _, in := range inputs {
		for _, init := range inits {
			checkDecode(t, []byte(in), init)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	env := sampleEnvelope()
	env.CausationID, env.Traceparent, env.Attempt = "c", "t", 2
	b, err := AppendEnvelope(nil, &env)
	if err != nil {
		t.Fatal(err)
	}
	var got Envelope
	if err := DecodeEnvelope(b, &got); err != nil {
		t.Fatal(err)
	}
	if !got.OccurredAt.Equal(env.OccurredAt) || !bytes.Equal(got.Payload, env.Payload) {
		t.Fatalf("round trip changed the envelope: %+v", got)
	}
	if !got.PayloadCompact {
		t.Fatal("round trip: AppendEnvelope's own payload not noted as compact")
	}
	got.OccurredAt, got.Payload, got.PayloadCompact = env.OccurredAt, env.Payload, env.PayloadCompact
	if !reflect.DeepEqual(got, env) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, env)
	}
}

// TestFastPathsTaken guards the speed: the canonical shapes must not fall
// back to encoding/json.
func TestFastPathsTaken(t *testing.T) {
	env := sampleEnvelope()
	env.CausationID = "c"
	if !isClean(env.Payload) {
		t.Fatal("a compact payload was sent to the slow path")
	}
	b, _ := AppendEnvelope(nil, &env)
	var got Envelope
	if !fastDecodeEnvelope(b, &got, true) {
		t.Fatal("an encoded envelope was sent to the slow path")
	}
	if isClean(json.RawMessage(`{"a": 1}`)) || isClean(json.RawMessage(`"<"`)) {
		t.Fatal("a payload json.Marshal changes was taken as clean")
	}
}

func FuzzDecodeEnvelope(f *testing.F) {
	enc, _ := json.Marshal(sampleEnvelope())
	f.Add(enc)
	f.Add([]byte(`{"id":"a","attempt":3,"payload":{"x":[1,"y",null,true]},"traceparent":"t"}`))
	f.Add([]byte(`{"occurredAt":"2026-11-22T03:34:24.123+05:30","payload":"s"}`))
	f.Add([]byte(`{"Key":"k","payload": [ 1 ] }`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data, Envelope{})
		checkDecode(t, data, sampleEnvelope())
	})
}

func FuzzAppendEnvelope(f *testing.F) {
	f.Add("id", "ws", "t.v1", "ws", "", "", 0, int64(1700000000), int64(5), []byte(`{"a":1}`), false)
	f.Add("<&>", "\u2028", "\xff", "é", "c", "tp", -3, int64(-62135596800), int64(0), []byte(" [1, \"<\"]"), false)
	f.Add("", "", "", "", "", "", 0, int64(0), int64(0), []byte(nil), true)
	f.Fuzz(func(t *testing.T, id, ws, typ, key, cause, tp string, attempt int, sec, nsec int64, payload []byte, nilPayload bool) {
		env := Envelope{ID: id, Workspace: ws, Type: typ, Key: key, CausationID: cause, Traceparent: tp,
			Attempt: attempt, OccurredAt: time.Unix(sec, nsec).UTC(), Payload: payload}
		if nilPayload {
			env.Payload = nil
		} else if env.Payload == nil {
			env.Payload = json.RawMessage{}
		}
		checkAppend(t, env)
		if sec%7 == 0 {
			env.OccurredAt = env.OccurredAt.In(time.FixedZone("z", int(nsec%50000)))
			checkAppend(t, env)
		}
	})
}

// FuzzValidator holds the validator to encoding/json's scanner: whatever it
// accepts, json.Valid accepts.
func FuzzValidator(f *testing.F) {
	f.Add([]byte(`{"a":[1,2.5e-3,"x",true,false,null,{}]}`))
	f.Add([]byte(` [ ] `))
	f.Add([]byte(`"\u12ab\n"`))
	f.Fuzz(func(t *testing.T, p []byte) {
		var v validator
		i := v.skipSpace(p, 0)
		end, ok := v.value(p, i)
		if ok {
			end = v.skipSpace(p, end)
		}
		whole := ok && end == len(p)
		if whole != json.Valid(p) && v.depth < maxDepth && !(json.Valid(p) && deeperThan(p, maxDepth)) {
			t.Fatalf("validator says %v, json.Valid says %v for %q", whole, json.Valid(p), p)
		}
		if isClean(p) {
			out, err := json.Marshal(json.RawMessage(p))
			if err != nil || !bytes.Equal(out, p) {
				t.Fatalf("isClean(%q) but json.Marshal gives %q, %v", p, out, err)
			}
		}
		want, werr := json.Marshal(json.RawMessage(p))
		got, gerr := appendRawJSON(nil, p)
		if (werr == nil) != (gerr == nil) || werr == nil && !bytes.Equal(got, want) {
			t.Fatalf("appendRawJSON(%q) = %q, %v; json.Marshal gives %q, %v", p, got, gerr, want, werr)
		}
	})
}

// isClean reports checkJSON's clean: json.Marshal copies p unchanged.
func isClean(p []byte) bool {
	_, clean := checkJSON(p)
	return clean
}

// deeperThan reports nesting beyond n (counting brackets outside strings
// is enough for the inputs the validator accepted up to its limit).
func deeperThan(p []byte, n int) bool {
	d, in, esc := 0, false, false
	for _, c := range p {
		switch {
		case esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case !in && (c == '[' || c == '{'):
			if d++; d > n {
				return true
			}
		case !in && (c == ']' || c == '}'):
			d--
		}
	}
	return false
}

func BenchmarkAppendEnvelope(b *testing.B) {
	env := sampleEnvelope()
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			buf, _ = AppendEnvelope(buf[:0], &env)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(&env)
		}
	})
}

func BenchmarkDecodeEnvelope(b *testing.B) {
	data, _ := json.Marshal(sampleEnvelope())
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var env Envelope
			_ = DecodeEnvelope(data, &env)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var env Envelope
			_ = json.Unmarshal(data, &env)
		}
	})
}

// FuzzValidJSON: ValidJSON answers exactly as json.Valid, deep nesting
// included. Its seeds run as a test.
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,2.5e-3,"x",true,false,null,{}]}`, ` [ ] `, "\t\"\\u12ab\\n\"\r\n", `{"a":1}x`, `{"a":1} {}`,
		`01`, `-`, `1.`, `1e`, `"\x"`, "\"\x01\"", `{"a" 1}`, `{,}`, `[1,]`, `nul`, ``, ` `,
		`"<p class=\"x\">&amp;</p>"`, "\"\xff\"", "\"\u2028\"",
		strings.Repeat("[", 600) + strings.Repeat("]", 600),
		// long strings with each kind of byte the string scan stops at
		`["abcdefgh<ijklmnop","abcdefghijklmnopq\\\"rs&t","0123456789abcdef\u2028xyz"]`,
		"\"abcdefghijklmno\x7f\xc3\xa9pqrstuvw\xe2\x80\xa8xyz\"", "\"abcdefghijk\x1fmnop\"", "\"abcdefghijklmnopqrstuvwxyz",
		strings.Repeat("[", 600) + strings.Repeat("]", 599),
		strings.Repeat(`{"a":`, 513) + "1" + strings.Repeat("}", 513),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		if got, want := ValidJSON(p), json.Valid(p); got != want {
			t.Fatalf("ValidJSON(%q) = %v, json.Valid says %v", p, got, want)
		}
	})
}

func BenchmarkValidJSON(b *testing.B) {
	body, _ := json.Marshal(map[string]any{"to": "u1@bench.example.com", "subject": "Your order",
		"htmlContent": strings.Repeat(`<p style="font-size:16px;color:#51545e;">Thanks {{ name }} for order {{ order.number }}.</p>`, 22),
		"data":        map[string]any{"name": "Ada", "items": []any{1, 2.5, "x", true, nil}}})
	for _, impl := range []struct {
		name  string
		valid func([]byte) bool
	}{{"ValidJSON", ValidJSON}, {"encoding-json", json.Valid}} {
		b.Run(impl.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if !impl.valid(body) {
					b.Fatal("invalid")
				}
			}
		})
	}
}

// FuzzJSONMembers: JSONMembers and JSONString answer as json.Unmarshal
// into map[string]json.RawMessage and string. Its seeds run as a test.
func FuzzJSONMembers(f *testing.F) {
	for _, s := range []string{
		`{"email":"a@b.c","firstName":"Ada","customFields":{"plan":"pro","n":[1, 2]}}`,
		` { "a" : 1 , "a" : [ ] , "b\u0041" : "x\"y" , "c":null } `, `{}`, `[]`, `"s"`, `{"a":1`, `{"a":1}}`,
		`{"é":"\u00e9ü","tab":"a\tb"}`, "{\"bad\":\"\xff\"}", `{"a":{"b":{"c":[{"d":"}"}]}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := JSONMembers(b)
		var want map[string]json.RawMessage
		err := json.Unmarshal(b, &want)
		if wantOK := err == nil && want != nil; ok != wantOK {
			t.Fatalf("JSONMembers(%q) ok %v, json.Unmarshal err %v", b, ok, err)
		}
		if ok && !reflect.DeepEqual(got, want) {
			t.Fatalf("JSONMembers(%q)\n got %q\nwant %q", b, got, want)
		}
		for _, v := range want {
			var ws string
			werr := json.Unmarshal(v, &ws)
			gs, gok := JSONString(v)
			if gok != (werr == nil) || gs != ws {
				t.Fatalf("JSONString(%q) = %q, %v; json.Unmarshal %q, %v", v, gs, gok, ws, werr)
			}
		}
	})
}

// TestValidatorStringBytes puts every byte value at every offset of a
// string, before and after a byte that needs escaping: validity and
// cleanliness match encoding/json.
func TestValidatorStringBytes(t *testing.T) {
	for k := 0; k < 24; k++ {
		for c := 0; c < 256; c++ {
			for _, escaped := range []string{"", "&"} {
				p := []byte(`"` + escaped + strings.Repeat("a", k) + string([]byte{byte(c)}) + strings.Repeat("b", 20) + `"`)
				if got, want := ValidJSON(p), json.Valid(p); got != want {
					t.Fatalf("ValidJSON(%q) = %v, json.Valid says %v", p, got, want)
				}
				out, err := json.Marshal(json.RawMessage(p))
				if clean := isClean(p); clean != (err == nil && bytes.Equal(out, p)) {
					t.Fatalf("isClean(%q) = %v; json.Marshal gives %q, %v", p, clean, out, err)
				}
			}
		}
	}
}

// FuzzCompactJSON: CompactJSON's valid is ValidJSON's answer, and compact
// means encoding/json's Compact leaves the text unchanged. Its seeds run as
// a test.
func FuzzCompactJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,"x y"]}`, `{"a": 1}`, ` {}`, `{} `, "[1,\n2]", `"<&>"`, `{"a":1}x`,
		strings.Repeat("[", 600) + strings.Repeat("]", 600)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		valid, compact := CompactJSON(p)
		if valid != json.Valid(p) {
			t.Fatalf("CompactJSON(%q) valid = %v, json.Valid says %v", p, valid, !valid)
		}
		if !valid {
			return
		}
		var out bytes.Buffer
		if err := json.Compact(&out, p); err != nil {
			t.Fatal(err)
		}
		// Beyond the validator's depth, compact is false (never wrongly true).
		if same := bytes.Equal(out.Bytes(), p); compact != same && (compact || !deeperThan(p, maxDepth)) {
			t.Fatalf("CompactJSON(%q) compact = %v, json.Compact changes it: %v", p, compact, !same)
		}
	})
}

// FuzzSkipJSONString: SkipJSONString ends where a scan a byte at a time
// ends, from any start. Its seeds run as a test.
func FuzzSkipJSONString(f *testing.F) {
	for _, s := range []string{`"abc"`, `"a\"b" x`, `"a\\" "`, `"\u003cp\u003e" , "x"`, `"ab\`, `"ab\\`, `"`, `"\"`, `x"y"`} {
		f.Add([]byte(s), 0)
	}
	f.Fuzz(func(t *testing.T, b []byte, i int) {
		if i < 0 || i >= len(b) {
			return
		}
		end, ok := SkipJSONString(b, i)
		wantEnd, wantOK := skipStringBytewise(b, i)
		if end != wantEnd || ok != wantOK {
			t.Fatalf("SkipJSONString(%q, %d) = %d, %v; a byte at a time: %d, %v", b, i, end, ok, wantEnd, wantOK)
		}
	})
}

// strBytewise is the validator's string check a byte at a time, as it was
// written first: the reference for FuzzValidatorString.
func strBytewise(v *validator, p []byte, i int) (int, bool) {
	for i++; i < len(p); {
		c := p[i]
		switch {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(p) {
				return 0, false
			}
			switch p[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+5 >= len(p) || !isHex(p[i+2]) || !isHex(p[i+3]) || !isHex(p[i+4]) || !isHex(p[i+5]) {
					return 0, false
				}
				i += 6
			default:
				return 0, false
			}
		case c < 0x20:
			return 0, false
		case c == '<' || c == '>' || c == '&':
			v.escape = true
			i++
		case c == 0xE2 && i+2 < len(p) && p[i+1] == 0x80 && p[i+2]&^1 == 0xA8:
			v.escape = true
			i += 3
		default:
			i++
		}
	}
	return 0, false
}

// FuzzValidatorString: the validator's string check ends, accepts and
// notes escapes as the byte-at-a-time check does. Its seeds run as a test.
func FuzzValidatorString(f *testing.F) {
	for _, s := range []string{`"abc"`, `"a\"b<" x`, `"\u003cp\u003e\u2028"`, "\"a\u2028b\"", "\"12345678\xe2\x80\xa9\"", `"ab\`,
		`"\u12"`, `"\u12\"x"`, "\"\x1f\"", `"\q"`, `"0123456789abcdef&"`, "\"0123456\xe2\x80\xa8x\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		if len(p) == 0 || p[0] != '"' {
			return
		}
		var a, b validator
		end, ok := a.str(p, 0)
		wantEnd, wantOK := strBytewise(&b, p, 0)
		if ok != wantOK || ok && (end != wantEnd || a.escape != b.escape) {
			t.Fatalf("str(%q) = %d, %v, escape %v; a byte at a time: %d, %v, escape %v", p, end, ok, a.escape, wantEnd, wantOK, b.escape)
		}
	})
}

// FuzzStoredValidator: on stored input the validator answers as it does
// on any input (end, validity and what json.Marshal would change), the
// first time and when long strings come from storedStrings. Its seeds run
// as a test.
func FuzzStoredValidator(f *testing.F) {
	long := strings.Repeat(`<p class=\"x\">Hi \u003cb\u003e é`, 30)
	for _, s := range []string{`{"a":"` + long + `"}`, `["` + long + `<", "` + long + `\u2028"]`, `{"a":"` + long + "\x01" + `"}`,
		`"` + long + `\q"`, `"` + long + `\u00"`, `{"a":"` + long + `", "b": 1}`, `"` + long} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		var plain validator
		end, ok := plain.value(p, 0)
		for i := 0; i < 2; i++ {
			stored := validator{stored: true}
			sEnd, sOK := stored.value(p, 0)
			if sOK != ok || ok && (sEnd != end || stored.escape != plain.escape || stored.space != plain.space) {
				t.Fatalf("stored check #%d of %q = %d, %v, escape %v; unstored: %d, %v, escape %v", i, p, sEnd, sOK, stored.escape, end, ok, plain.escape)
			}
		}
	})
}
