package ingest

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRedactBody(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"no secret words: untouched byte for byte", `{ "email":"a@b.c",  "n": [1,2] }`, `{ "email":"a@b.c",  "n": [1,2] }`},
		{"top level", `{"password":"hunter2","email":"a@b.c"}`, `{"password":"[REDACTED]","email":"a@b.c"}`},
		{"case and substring", `{"userPassword":"x","X-API-KEY":"y","clientSecretValue":1,"Authorization":"Bearer z"}`,
			`{"userPassword":"[REDACTED]","X-API-KEY":"[REDACTED]","clientSecretValue":"[REDACTED]","Authorization":"[REDACTED]"}`},
		{"api_key and apiKey and credentials", `{"api_key":"a","apiKey":"b","credentials":{"user":"u","pw":"p"}}`,
			`{"api_key":"[REDACTED]","apiKey":"[REDACTED]","credentials":"[REDACTED]"}`},
		{"deep inside arrays", `{"a":[{"b":{"c":[{"refresh_token":"t","ok":true}]}}],"d":[[{"SECRET":null}]]}`,
			`{"a":[{"b":{"c":[{"refresh_token":"[REDACTED]","ok":true}]}}],"d":[[{"SECRET":"[REDACTED]"}]]}`},
		{"value mentioning a word is kept", `{"note":"my password is long","token_count_hint":"x"}`,
			`{"note":"my password is long","token_count_hint":"[REDACTED]"}`},
		{"escaped key", `{"pass\u0077ord":"x"}`, `{"pass\u0077ord":"[REDACTED]"}`},
		{"escapes in values, then a secret", `{"html":"\u003cb\u003etoken\u003c/b\u003e","n":"\u0026","apiKey":"k"}`,
			`{"html":"\u003cb\u003etoken\u003c/b\u003e","n":"\u0026","apiKey":"[REDACTED]"}`},
		{"attachments content omitted", `{"attachments":[{"filename":"a.pdf","contentType":"application/pdf","content":"aGVsbG8="},{"filename":"b","content":"QUJD"}]}`,
			`{"attachments":[{"filename":"a.pdf","contentType":"application/pdf","content":"[OMITTED 5 bytes]"},{"filename":"b","content":"[OMITTED 3 bytes]"}]}`},
		{"content outside attachments kept", `{"content":"hello","attachments":[]}`, `{"content":"hello","attachments":[]}`},
		{"whitespace kept", "{\n  \"password\" : \"x\" ,\n  \"a\" : [ 1 , 2 ]\n}", "{\n  \"password\" : \"[REDACTED]\" ,\n  \"a\" : [ 1 , 2 ]\n}"},
		{"top-level array", `[{"token":"a"},{"x":"y"}]`, `[{"token":"[REDACTED]"},{"x":"y"}]`},
		{"invalid JSON naming a secret", `password=hunter2&x=1`, redactedNonObj},
		{"invalid JSON without secrets kept", `not json`, `not json`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := string(RedactBody([]byte(c.in)))
			if got != c.want {
				t.Fatalf("RedactBody(%s)\n got %s\nwant %s", c.in, got, c.want)
			}
			if json.Valid([]byte(c.in)) && !json.Valid([]byte(got)) {
				t.Fatalf("output is not valid JSON: %s", got)
			}
		})
	}
}

func TestRedactFastPathDoesNotCopy(t *testing.T) {
	in := []byte(`{"email":"a@b.c","name":"Ann","kind":"api_key","note":"token: \"x\"","s":"password","html":"\u003cp\u003e"}`)
	out := RedactBody(in)
	if &out[0] != &in[0] {
		t.Fatal("body without secret words was copied; the fast path should return it as is")
	}
}

func TestCapBody(t *testing.T) {
	s, cut := capBody([]byte("héllo"), 2) // 'é' is 2 bytes: cutting at 2 would split it
	if s != "h" || !cut {
		t.Fatalf("capBody = %q, %v; want \"h\", true", s, cut)
	}
	s, cut = capBody([]byte("abc"), 3)
	if s != "abc" || cut {
		t.Fatalf("capBody = %q, %v", s, cut)
	}
	big := strings.Repeat("x", 100)
	s, cut = capBody([]byte(big), 10)
	if len(s) != 10 || !cut {
		t.Fatalf("capBody len %d cut %v", len(s), cut)
	}
}

func BenchmarkRedactFastPath(b *testing.B) {
	body := []byte(`{"email":"someone@example.com","event":"signup","properties":{"plan":"pro","seats":3}}`)
	b.ReportAllocs()
	for b.Loop() {
		RedactBody(body)
	}
}

// TestRedactCappedMatchesRedactThenCap cuts JSON bodies with secrets, an
// attachment and multi-byte text at every length: skipping the redaction of
// what the cap drops must store exactly what redacting the whole body and
// then cutting it stores.
func TestRedactCappedMatchesRedactThenCap(t *testing.T) {
	bodies := []string{
		`{"items":[{"email":"a@b.c","name":"Zoë"},{"email":"d@e.f"}],"password":"hunter2","note":"après"}`,
		`{"a":"xxxxxxxxxxxxxxxx","apiKey" : "k-123","attachments":[{"name":"a.pdf","content":"QUJD"}],"z":1}`,
		`[{"token":"t"},{"kind":"api_key","Secret":{"nested":"value"}},"passwor"]`,
		`  {"list":["` + strings.Repeat("é", 40) + `"],"credential":"c"}`,
	}
	for _, body := range bodies {
		for n := 1; n <= len(body)+1; n++ {
			want, wantCut := capBody(RedactBody([]byte(body)), n)
			got, gotCut := redactCapped([]byte(body), n)
			if got != want || gotCut != wantCut {
				t.Fatalf("cap %d of %s:\n got %q, %v\nwant %q, %v", n, body, got, gotCut, want, wantCut)
			}
		}
	}
}
