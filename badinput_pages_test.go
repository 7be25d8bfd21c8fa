package main

import (
	"net/url"
	"strings"

	"sendstream/ingest/contacts"
	"sendstream/sinks/email"
)

// pageOps are the public routes the OpenAPI document does not describe
// because browsers, not API clients, call them: the hosted sign-up form,
// the double opt-in link, the unsubscribe page and its one-click POST,
// track.js and its page-view beacon. They get the same kinds of bad input;
// their answers are checked for the status only where they are HTML
// (never a 5xx, a 4xx for bad input), and for the error format where they
// are JSON.
func pageOps(e *biEnv) []*biOp {
	signer, _ := contacts.NewSigner(e.secret, 0)
	confirm, _ := signer.Sign(e.ws, e.memberID)
	unsub := email.SignUnsubscribe(e.secret, email.Unsubscribe{Workspace: e.ws, Email: "unsub-" + e.run + "@example.com"})
	form := [][2]string{{"Content-Type", "application/x-www-form-urlencoded"}}
	pathParam := func(name string) []map[string]any { return []map[string]any{{"name": name, "in": "path"}} }
	query := func(name string) []map[string]any {
		return []map[string]any{{"name": name, "in": "query", "schema": map[string]any{"type": "string"}}}
	}
	return []*biOp{
		{id: "formShow", method: "GET", path: "/forms/{listId}", params: pathParam("listId"), extra: true, page: true, noAuth: true,
			base: func(string) baseReq { return baseReq{path: map[string]string{"listId": e.listID}} }},
		{id: "formSubmit", method: "POST", path: "/forms/{listId}", params: pathParam("listId"), extra: true, page: true, noAuth: true,
			base: func(m string) baseReq {
				return baseReq{path: map[string]string{"listId": e.listID}, raw: []byte("email=" + m + "%40example.com&firstName=Ann"), header: form}
			},
			custom: func(r *biRun, op *biOp) []*biCase { return formCases(r, op, e, form) }},
		{id: "confirm", method: "GET", path: "/confirm", params: query("token"), extra: true, page: true, noAuth: true,
			base: func(string) baseReq { return baseReq{query: [][2]string{{"token", confirm}}} }},
		{id: "unsubscribePage", method: "GET", path: "/unsubscribe/{token}", params: pathParam("token"), extra: true, page: true, noAuth: true,
			base: func(string) baseReq { return baseReq{path: map[string]string{"token": unsub}} }},
		{id: "unsubscribe", method: "POST", path: "/unsubscribe/{token}", params: pathParam("token"), extra: true, page: true, noAuth: true,
			base: func(string) baseReq { return baseReq{path: map[string]string{"token": unsub}} }},
		{id: "trackJS", method: "GET", path: "/track.js", extra: true, page: true, noAuth: true,
			base: func(string) baseReq { return baseReq{} }},
		{id: "pageview", method: "POST", path: "/api/track/pageview", extra: true, noAuth: true, textPlain: true,
			body: map[string]any{"type": "object", "required": []any{"s", "u"}, "properties": map[string]any{
				"s": map[string]any{"type": "string"}, "u": map[string]any{"type": "string"}, "r": map[string]any{"type": "string"},
				"t": map[string]any{"type": "string"}, "w": map[string]any{"type": "integer"}}},
			base: func(m string) baseReq {
				return baseReq{body: map[string]any{"s": e.tracking, "u": "https://example.com/p?utm_source=x", "r": "https://ref.example/", "t": m, "w": 1280}}
			}},
	}
}

// formCases are the inputs of a sign-up form post: each field's value
// malformed (percent-encoding, NUL, invalid UTF-8, invisible characters),
// the body as a whole, and the list id.
func formCases(r *biRun, op *biOp, e *biEnv, form [][2]string) []*biCase {
	var out []*biCase
	uri := r.uri(op, op.base(""), nil, "")
	add := func(label string, body string, hdr [][2]string, x expect, field, m string) {
		out = append(out, &biCase{field: field, label: label, uri: uri, body: []byte(body), header: hdr, expect: x, marker: m})
	}
	for _, v := range []struct {
		field, label, raw string
		x                 expect
	}{
		{"email", "empty", "", refuse},
		{"email", "%00", "%00", refuse},
		{"email", "%FF", "%FF", refuse},
		{"email", "a%00b", "a%00b%40example.com", refuse},
		{"email", "%ZZ", "%ZZ", refuse},
		{"email", "not an address", "not-an-address", refuse},
		{"email", "bidi override", "a%E2%80%AEb%40example.com", refuse},
		{"email", "raw invalid UTF-8", "a\xffb%40example.com", refuse},
		{"firstName", "%00", "a%00b", refuse},
		{"firstName", "%FF", "%FF", refuse},
		{"firstName", "%ZZ", "%ZZ", refuse},
		{"firstName", "raw invalid UTF-8", "\xff", refuse},
		{"firstName", "10,000 characters", strings.Repeat("a", 10000), either},
	} {
		m := r.marker()
		fields := url.Values{"email": {m + "@example.com"}, "firstName": {"Ann"}}
		fields.Del(v.field)
		body := fields.Encode() + "&" + v.field + "=" + v.raw
		add("form "+v.label, body, form, v.x, v.field, m)
	}
	m := r.marker()
	add("the base form", "email="+m+"%40example.com&firstName=Ann", form, accept, "", m)
	m = r.marker()
	add("JSON body", `{"email":"`+m+`@example.com","firstName":"Ann"}`, nil, accept, "", m)
	m = r.marker()
	add(`JSON body with NUL`, `{"email":"`+m+`@example.com","firstName":"a\u0000b"}`, nil, refuse, "firstName", m)
	m = r.marker()
	add("multipart body", "--x\r\nContent-Disposition: form-data; name=\"email\"\r\n\r\n"+m+"@example.com\r\n--x--\r\n",
		[][2]string{{"Content-Type", "multipart/form-data; boundary=x"}}, refuse, "", m)
	m = r.marker()
	add("100 KB body", "email="+m+"%40example.com&firstName="+strings.Repeat("a", 100<<10), form, refuse, "", m)
	for _, v := range pathValues {
		m := r.marker()
		out = append(out, &biCase{field: "listId", label: "path " + v.label, uri: r.uri(op, op.base(""), map[string]string{"listId": v.raw}, ""),
			body: []byte("email=" + m + "%40example.com"), header: form, expect: refuse, marker: m})
	}
	return out
}
