package render

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func TestEscapesEveryValueInHTML(t *testing.T) {
	e := NewEngine(0)
	data := map[string]any{"name": `<script>alert("x")</script> & co`, "items": []any{"<a>", "b&"}, "n": int64(12345678901)}
	b := NewBindings(data, &Contact{FirstName: "Ada <Lovelace>"}, map[string]any{"plan": "<pro>"})
	cases := []struct{ src, want string }{
		{`Hi {{ name }}!`, `Hi &lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; co!`},
		{`{{ data.name | upcase }}`, `&lt;SCRIPT&gt;ALERT(&#34;X&#34;)&lt;/SCRIPT&gt; &amp; CO`},
		{`{{ contact.first_name }} {{ customField.plan }}`, `Ada &lt;Lovelace&gt; &lt;pro&gt;`},
		{`{% for i in items %}[{{ i }}]{% endfor %}`, `[&lt;a&gt;][b&amp;]`},
		{`{{ items }}`, `&lt;a&gt;b&amp;`},
		{`{{ n }}`, `12345678901`},
		{`{{- name | size -}} x`, `32x`},
		{`{% raw %}{{ name }}{% endraw %}`, `{{ name }}`},
		{`{% capture g %}<b>{{ name }}</b>{% endcapture %}{{ g }}`, `<b>&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; co</b>`},
		{`{% assign x = name %}{{ x }}`, `&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; co`},
		{`<p class="a">{{ missing }}</p>`, `<p class="a"></p>`},
		{`{{ contact.first_name | escape }}|{{ name | escape_once }}`, `Ada &lt;Lovelace&gt;|&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; co`},
		{`{{ "<%}>" | append: name | truncate: 8 }}`, `&lt;%}&gt;&lt;...`}, // "%}" keeps the filter form
		{`a {{- "'" -}} b {{ 1.5 }} {{ nil }}|{{ "" }}|`, `a&#39;b 1.5 ||`},
	}
	for _, c := range cases {
		tpl, err := e.Parse(c.src, HTML)
		if err != nil {
			t.Fatalf("parse %q: %v", c.src, err)
		}
		got, err := tpl.Render(b)
		if err != nil {
			t.Fatalf("render %q: %v", c.src, err)
		}
		if got != c.want {
			t.Errorf("render %q:\n got %q\nwant %q", c.src, got, c.want)
		}
	}
	// Text mode leaves values alone.
	tpl, err := e.Parse(`Hi {{ name }}`, Text)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := tpl.Render(b); got != `Hi <script>alert("x")</script> & co` {
		t.Errorf("text render = %q", got)
	}
}

func TestVariablesReadByTheTemplate(t *testing.T) {
	e := NewEngine(0)
	cases := []struct {
		src  string
		want []string
	}{
		{`{{ data.order.id }} {{ name }}`, []string{"data.order.id", "name"}},
		{`{{ contact.first_name | default: "friend" }}`, []string{"contact.first_name"}},
		{`{{ customField.plan }}`, []string{"customField.plan"}},
		{`{% for item in data.items reversed limit: 2 %}{{ item.name }}{{ forloop.index }}{% else %}{{ empty_msg }}{% endfor %}`, []string{"data.items", "empty_msg"}},
		{`{% if vip and total > 10 %}a{% elsif coupon %}b{% else %}c{% endif %}`, []string{"coupon", "total", "vip"}},
		{`{% unless shipped %}x{% endunless %}`, []string{"shipped"}},
		{`{% case plan %}{% when "pro" %}{{ pro_msg }}{% endcase %}`, []string{"plan", "pro_msg"}},
		{`{% assign total = price | times: qty %}{{ total }}`, []string{"price", "qty"}},
		{`{% capture greeting %}Hi {{ who }}{% endcapture %}{{ greeting }}`, []string{"who"}},
		{`{{ user["first name"] }} {{ list[0].x }} {{ map[key] }}`, []string{"key", "list", "map", "user.first name"}},
		{`{{ items.size }} {{ items.first.name }}`, []string{"items"}},
		{`{{ "literal" | append: suffix }} {{ 3 | plus: bonus }}`, []string{"bonus", "suffix"}},
		{`{% for i in (1..data.n) %}{{ i }}{% endfor %}`, []string{"data.n"}},
		{`{% comment %}{{ hidden }}{% endcomment %}{% raw %}{{ raw }}{% endraw %}`, nil},
		{`{% tablerow p in products cols: 2 %}{{ p.title }}{% endtablerow %}`, []string{"products"}},
	}
	for _, c := range cases {
		for _, mode := range []Mode{Text, HTML} {
			tpl, err := e.Parse(c.src, mode)
			if err != nil {
				t.Fatalf("parse %q: %v", c.src, err)
			}
			got := tpl.Variables()
			if len(got) == 0 && len(c.want) == 0 {
				continue
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("variables of %q (mode %d) = %q, want %q", c.src, mode, got, c.want)
			}
		}
	}
}

func TestSyntaxErrorsAndForbiddenTags(t *testing.T) {
	e := NewEngine(0)
	for _, src := range []string{`{% if x %}unclosed`, `{{ x | }}`, `{% include "/etc/passwd" %}`, `{% for %}{% endfor %}`} {
		_, err := e.Parse(src, HTML)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("parse %q: err = %v, want a SyntaxError", src, err)
		}
	}
	_, err := e.Compile(Source{Subject: "Hi {% if name %}", HTML: "ok"})
	if err == nil || !strings.HasPrefix(err.Error(), "subject: ") {
		t.Errorf("compile with a broken subject: %v", err)
	}
}

func TestParseIsCachedPerSource(t *testing.T) {
	e := NewEngine(8)
	a, _ := e.Parse("Hello {{ x }}", HTML)
	b, _ := e.Parse("Hello {{ x }}", HTML)
	if a != b {
		t.Error("same source parsed twice: cache missed")
	}
	c, _ := e.Parse("Hello {{ x }}", Text)
	if c == a {
		t.Error("text and HTML modes share a cache entry")
	}
	d, _ := e.Parse("Hello {{ y }}", HTML)
	if d == a || d.Variables()[0] != "y" {
		t.Error("a changed source reused the old parse")
	}
	for i := 0; i < 40; i++ {
		_, _ = e.Parse(strings.Repeat("x", i), Text)
	}
	if n := e.Cached(); n > 8 {
		t.Errorf("cache holds %d entries, bound is 8", n)
	}
}

func TestCompileIsCachedPerSource(t *testing.T) {
	e := NewEngine(4)
	src := Source{Subject: "Order {{ id }}", HTML: "<p>{{ name }}</p>"}
	a, err := e.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := e.Compile(src)
	if a != b {
		t.Error("same source compiled twice: cache missed")
	}
	src.Text = "Order {{ id }} for {{ email }}"
	c, _ := e.Compile(src)
	if c == a || strings.Join(c.Variables(), ",") != "email,id,name" || strings.Join(a.Variables(), ",") != "id,name" {
		t.Errorf("a changed part: variables %v (was %v)", c.Variables(), a.Variables())
	}
	for i := 0; i < 20; i++ {
		_, _ = e.Compile(Source{Subject: strings.Repeat("s", i), HTML: "x"})
	}
	e.mu.Lock()
	n := len(e.compiled)
	e.mu.Unlock()
	if n > 4 {
		t.Errorf("compiled cache holds %d entries, bound is 4", n)
	}
	if _, err := e.Compile(Source{Subject: "{% if %}", HTML: "x"}); err == nil {
		t.Error("a syntax error compiled")
	}
}

func TestConcurrentRender(t *testing.T) {
	e := NewEngine(0)
	c, err := e.Compile(Source{Subject: "Order {{ id }}", HTML: "<p>{% for i in items %}{{ i }},{% endfor %}</p>"})
	if err != nil {
		t.Fatal(err)
	}
	// Odd goroutines' data holds a map, which the fast path hands back to
	// the library: both paths run at once.
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			items, want := []any{"a", "<b>"}, "<p>a,&lt;b&gt;,</p>"
			if g%2 == 1 {
				items, want = []any{"a", map[string]any{"k": "<v>"}}, "<p>a,map[k:&lt;v&gt;],</p>"
			}
			for i := 0; i < 200; i++ {
				b := NewBindings(map[string]any{"id": int64(i), "items": items}, nil, nil)
				out, err := c.Render(b)
				if err != nil || out.HTML != want || !strings.HasPrefix(out.Subject, "Order ") {
					t.Errorf("render: %+v %v", out, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestResolvedAndDecodeData(t *testing.T) {
	data, depth, err := DecodeData([]byte(`{"a":{"b":[{"c":1}]},"n":12345678901,"f":1.5,"z":null,"s":""}`))
	if err != nil {
		t.Fatal(err)
	}
	if depth != 4 {
		t.Errorf("depth = %d, want 4", depth)
	}
	if data["n"] != int64(12345678901) || data["f"] != 1.5 {
		t.Errorf("numbers: %#v %#v", data["n"], data["f"])
	}
	b := NewBindings(data, &Contact{Email: "a@x.io", FirstName: "Ada"}, map[string]any{"plan": "pro"})
	for path, want := range map[string]bool{
		"a.b": true, "data.a.b": true, "n": true, "z": false, "data.z": false, "s": true,
		"missing": false, "a.x": false, "contact.first_name": true, "contact.firstName": true,
		"contact.country": false, "customField.plan": true, "customField.other": false,
	} {
		if got := b.Resolved(path); got != want {
			t.Errorf("Resolved(%q) = %v, want %v", path, got, want)
		}
	}
	if got := b.Unresolved([]string{"a", "zz", "s"}); !reflect.DeepEqual(got, []string{"zz"}) {
		t.Errorf("Unresolved = %v", got)
	}
	if _, d, _ := DecodeData(nil); d != 0 {
		t.Errorf("absent data depth %d", d)
	}
}

func TestRenderErrorsAndTextFallback(t *testing.T) {
	e := NewEngine(0)
	c, err := e.Compile(Source{Subject: "Hi\n {{ name }}", Preheader: "Your {{ thing }}", HTML: `<html><head><style>p{}</style></head><body><p>Hello <b>{{ name }}</b></p><a href="https://x.io/a?b=1&amp;c=2">Track</a><br>bye</body></html>`})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Render(NewBindings(map[string]any{"name": "A&B", "thing": "receipt"}, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if out.Subject != "Hi A&B" || out.Preheader != "Your receipt" {
		t.Errorf("subject %q preheader %q", out.Subject, out.Preheader)
	}
	if want := "Hello A&B\nTrack (https://x.io/a?b=1&c=2)\nbye\n"; out.Text != want {
		t.Errorf("text = %q, want %q", out.Text, want)
	}
	bad, err := e.Compile(Source{Subject: "x", HTML: `{% for i in 5 %}{{ i | divided_by: 0 }}{% endfor %}{{ 1 | divided_by: 0 }}`})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Render(NewBindings(nil, nil, nil))
	var re *RenderError
	if !errors.As(err, &re) {
		t.Errorf("render error = %v, want RenderError", err)
	}
	// Messages quote the object as the author wrote it, not as escaped.
	for src, want := range map[string]string{
		"a\n{{- 1 | divided_by: 0 -}}": `html: Liquid error (line 1): error applying filter "divided_by" ("division by zero") in {{- 1 | divided_by: 0 -}}`,
		`{{ "%}" | divided_by: 0 }}`:   `html: can't convert string(%}) to type float64 in {{ "%}" | divided_by: 0 }}`,
	} {
		c, err := e.Compile(Source{Subject: "x", HTML: src})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Render(NewBindings(nil, nil, nil)); err == nil || err.Error() != want {
			t.Errorf("render %q: error %v, want %s", src, err, want)
		}
	}
	if _, err := e.Compile(Source{Subject: "x", HTML: `{% if a %}{{ x | }}{% endif %}`}); err == nil || err.Error() != `html: syntax error in "x |" in {{ x | }}` {
		t.Errorf("syntax error = %v", err)
	}
}

func TestTextFromHTML(t *testing.T) {
	cases := []struct{ in, want string }{
		{`<html><head><title>T</title><style>p{color:red}</style></head><body><div style="display: none;max-height:0">Preview <div>nested</div> text</div><h1>Title</h1><p>One &amp; two</p><ul><li>a</li><li>b</li></ul><script>x()</script>End</body></html>`,
			"Title\nOne & two\na\nb\nEnd\n"},
		{`<p>Visit <a href='https://x.io'>https://x.io</a> or <A HREF="https://y.io/?a=1&amp;b=2">our <b>site</b></a>.</p>`,
			"Visit https://x.io or our site (https://y.io/?a=1&b=2).\n"},
		{"<p>a   b\t c</p>\n\n\n\n<p>d</p><br/><br>e", "a b c\n\nd\n\ne\n"},
		{"plain < text with a lone bracket", "plain < text with a lone bracket\n"},
		{"", "\n"},
	}
	for _, c := range cases {
		if got := TextFromHTML(c.in); got != c.want {
			t.Errorf("TextFromHTML(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

// TestDecodeDataMatchesEncodingJSON compares DecodeData with encoding/json
// (numbers as int64 when integral) on escapes, nesting, duplicates and
// every JSON type.
func TestDecodeDataMatchesEncodingJSON(t *testing.T) {
	for _, in := range decodeCases {
		checkDecode(t, in)
	}
	for _, bad := range []string{`[1]`, `"s"`, `{"a":}`, `{"a":1`, `{"a":1]`, `{"a":[1}`, `{"a" 1}`, `{"a":tru}`, `{"a":"x`, `{1:2}`} {
		if _, _, err := DecodeData([]byte(bad)); err == nil {
			t.Errorf("DecodeData(%s): want an error", bad)
		}
	}
}

// FuzzDecodeDataMatchesEncodingJSON holds DecodeData to encoding/json on
// any JSON object in valid UTF-8 without lone surrogate escapes (which
// encoding/json replaces with U+FFFD and DecodeData keeps as they are).
func FuzzDecodeDataMatchesEncodingJSON(f *testing.F) {
	for _, in := range decodeCases {
		f.Add(in)
	}
	surrogate := regexp.MustCompile(`\\u[dD][89a-fA-F]`)
	f.Fuzz(func(t *testing.T, in string) {
		var v map[string]any
		if !utf8.ValidString(in) || surrogate.MatchString(in) || json.Unmarshal([]byte(in), &v) != nil || v == nil {
			return
		}
		checkDecode(t, in)
	})
}

// decodeCases are data objects DecodeData must decode as encoding/json does.
var decodeCases = []string{
	`{}`,
	` {"a":1} `,
	`{"a\"b":"x\u00e9\n\\","n":-12345678901,"f":1.5e3,"big":123456789012345678901234,"t":true,"f2":false,"z":null}`,
	`{"l":[[],[1,[2,{"k":[]}]],{"x":{}}],"d":1,"d":2}`,
	`{"html":"<p>\u003c&amp;</p>","u":"\ud83d\ude00"}`,
	"\t{ \"a\" :\r\n[ 1 , -0.5e-3 , { } , [ ] ] , \"b\\\\\" : \"\\\\\" }\n",
	`{"deep":{"a":{"b":{"c":{"d":[[[{"e":"x]}[{"}]]]}}}}}`,
}

// checkDecode compares DecodeData on in with encoding/json (numbers as
// int64 when integral), value and depth.
func checkDecode(t *testing.T, in string) {
	t.Helper()
	got, depth, err := DecodeData([]byte(in))
	if err != nil {
		t.Fatalf("DecodeData(%s): %v", in, err)
	}
	var want map[string]any
	dec := json.NewDecoder(strings.NewReader(in))
	dec.UseNumber()
	if err := dec.Decode(&want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, convertNumbers(want)) {
		t.Errorf("DecodeData(%s)\n got %#v\nwant %#v", in, got, want)
	}
	if d := jsonDepth(want); depth != d {
		t.Errorf("DecodeData(%s) depth %d, want %d", in, depth, d)
	}
}

func convertNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = convertNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = convertNumbers(e)
		}
	case json.Number:
		return number(x)
	}
	return v
}

func jsonDepth(v any) int {
	d := 0
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			d = max(d, jsonDepth(e))
		}
		return d + 1
	case []any:
		for _, e := range x {
			d = max(d, jsonDepth(e))
		}
		return d + 1
	}
	return 0
}

func BenchmarkDecodeData(b *testing.B) {
	raw := []byte(`{"name":"Ada","order":{"number":"100001","date":"2025-01-02","currency":"EUR","total":"86.50","items":[{"name":"Green tea","quantity":2,"price":"12.50"},{"name":"Teapot <blue>","quantity":1,"price":"49.00"}]},"address":{"line1":"12 Example Street","city":"Berlin","zip":"10115"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := DecodeData(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// receiptData is the data the transactional benchmarks send with the
// receipt.
const receiptData = `{"name":"Ada","order":{"number":"100001","date":"2025-01-02","currency":"EUR","total":"86.50","items":[{"name":"Green tea, 250 g","quantity":2,"price":"12.50"},{"name":"Ceramic teapot <blue>","quantity":1,"price":"49.00"},{"name":"Bamboo whisk","quantity":1,"price":"12.50"}]},"address":{"line1":"12 Example Street","city":"Berlin","zip":"10115"}}`

// receipt compiles the transactional benchmarks' receipt (bench/receipt.html:
// about 2 KB of HTML, 17 escaped values, a loop) with their subject, and
// decodes its data.
func receipt(tb testing.TB) (*Compiled, map[string]any) {
	tb.Helper()
	src, err := os.ReadFile("../../../bench/receipt.html")
	if err != nil {
		tb.Fatal(err)
	}
	c, err := NewEngine(0).Compile(Source{Subject: "Your order {{ order.number }} is confirmed", HTML: string(src)})
	if err != nil {
		tb.Fatal(err)
	}
	data, _, err := DecodeData([]byte(receiptData))
	if err != nil {
		tb.Fatal(err)
	}
	return c, data
}

// BenchmarkRenderReceipt renders the receipt the way the delivery stage
// does.
func BenchmarkRenderReceipt(b *testing.B) {
	c, data := receipt(b)
	bind := NewBindings(data, nil, nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Render(bind); err != nil {
			b.Fatal(err)
		}
	}
}

// tidyReference is tidyText written the obvious way (split, fields, join).
func tidyReference(s string) string {
	var out []string
	blank := 0
	for _, line := range strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n") {
		line = strings.Join(strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' || r == '\r' }), " ")
		if line == "" {
			blank++
			continue
		}
		if len(out) > 0 && blank > 0 {
			out = append(out, "")
		}
		blank = 0
		out = append(out, line)
	}
	return strings.Join(out, "\n") + "\n"
}

func FuzzTidyText(f *testing.F) {
	for _, s := range []string{"", "\n", " a  b \t\r\n\n\n c\r\n", "x\n\n", "\n\n y", "é \t ü\n\r\r\nz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := tidyText(s), tidyReference(s); got != want {
			t.Errorf("tidyText(%q) = %q, want %q", s, got, want)
		}
	})
}

func TestSkipElement(t *testing.T) {
	for _, c := range []struct {
		h, name string
		i, want int
	}{
		{"<head><title>x</title></HEAD>after", "head", 6, 29},
		{"<style>a</b></Style >z", "style", 7, 21},
		{"<script>x</scrip", "script", 8, 16},
		{"<title>never closed", "title", 7, 19},
		{"<head></he", "head", 6, 10},
	} {
		if got := skipElement(c.h, c.i, c.name); got != c.want {
			t.Errorf("skipElement(%q, %d, %q) = %d, want %d", c.h, c.i, c.name, got, c.want)
		}
	}
}

// rawCases are data objects whose paths NewRawBindings must resolve as
// NewBindings over DecodeData does, and whose DataDepth must match.
var rawCases = []string{
	`{"a":{"b":[{"c":1}]},"n":12345678901,"f":1.5,"z":null,"s":"","t":true}`,
	`{}`, `null`, ``,
	`{"data":{"x":1},"contact":{"y":2},"customField":{"plan":"x"},"x":3}`,
	`{"a":null,"a":1}`, `{"a":1,"a":null}`, `{"a":{"b":1},"a":{"c":2}}`,
	`{"k\u0065y":{"in\"ner":1},"s":"{}","q":"{\"a\":1}","arr":[1,{"a":1}]}`,
	"{ \"sp\" : { \"a\" : [ ] , \"b\" : { } } }",
	`{"deep":{"a":{"b":{"c":{"d":[[[{"e":"x]}[{"}]]]}}}}}`,
}

var rawPaths = []string{
	"a", "a.b", "a.b.c", "a.c", "data", "data.a.b", "data.data.x", "data.contact.y",
	"contact", "contact.first_name", "contact.y", "customField.plan", "customField.other",
	"n", "f", "z", "data.z", "s", "s.x", "t", "missing", "key", "key.in\"ner", "q.a",
	"arr", "arr.0", "sp.a", "sp.b", "sp.b.c", "x", "deep.a.b.c.d", "deep.a.b.c.d.e",
}

func checkRaw(t *testing.T, doc string) {
	t.Helper()
	data, depth, err := DecodeData([]byte(doc))
	if err != nil {
		t.Fatalf("DecodeData(%s): %v", doc, err)
	}
	if got := DataDepth([]byte(doc)); got != depth {
		t.Errorf("DataDepth(%s) = %d, DecodeData says %d", doc, got, depth)
	}
	c, custom := &Contact{Email: "a@x.io", FirstName: "Ada"}, map[string]any{"plan": "pro"}
	want, raw := NewBindings(data, c, custom), NewRawBindings([]byte(doc), c, custom)
	for _, p := range rawPaths {
		if w, g := want.Resolved(p), raw.Resolved(p); w != g {
			t.Errorf("data %s, path %q: raw bindings say %v, decoded %v", doc, p, g, w)
		}
	}
	if w, g := want.Unresolved(rawPaths), raw.Unresolved(rawPaths); !slices.Equal(w, g) {
		t.Errorf("data %s: raw bindings leave %q unresolved, decoded %q", doc, g, w)
	}
}

func TestRawBindingsResolveAsDecoded(t *testing.T) {
	for _, doc := range rawCases {
		checkRaw(t, doc)
	}
}

func FuzzRawBindings(f *testing.F) {
	for _, doc := range rawCases {
		f.Add(doc)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		var v map[string]any
		if json.Unmarshal([]byte(doc), &v) != nil || v == nil {
			return // only checked JSON objects reach the bindings
		}
		checkRaw(t, doc)
	})
}

// Raw bindings render as the decoded ones do (decoding on the way).
func TestRawBindingsRender(t *testing.T) {
	c, err := NewEngine(0).Compile(Source{Subject: "Order {{ order.id }} for {{ contact.first_name }}",
		HTML: "<p>{{ data.note }} {{ customField.plan }} {% for i in items %}{{ i }},{% endfor %}</p>"})
	if err != nil {
		t.Fatal(err)
	}
	doc := []byte(`{"order":{"id":7},"note":"<b>hi</b>","items":[1,2],"contact":{"first_name":"shadowed"}}`)
	data, _, _ := DecodeData(doc)
	ct, custom := &Contact{FirstName: "Ada"}, map[string]any{"plan": "pro"}
	want, err := c.Render(NewBindings(data, ct, custom))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Render(NewRawBindings(doc, ct, custom))
	if err != nil || got != want {
		t.Fatalf("raw bindings rendered %+v (%v), decoded %+v", got, err, want)
	}
	if want.Subject != "Order 7 for Ada" || !strings.Contains(want.HTML, "&lt;b&gt;hi&lt;/b&gt; pro 1,2,") {
		t.Errorf("rendered %+v", want)
	}
}

// BenchmarkUnresolvedRaw checks the receipt's variables against its data
// as JSON, the way a send does.
func BenchmarkUnresolvedRaw(b *testing.B) {
	c, _ := receipt(b)
	bind := NewRawBindings([]byte(receiptData), &Contact{Email: "a@x.io"}, nil)
	vars := c.Variables()
	b.ReportAllocs()
	for b.Loop() {
		if u := bind.Unresolved(vars); len(u) != 0 {
			b.Fatal(u)
		}
	}
}

// BenchmarkTextFromHTML derives the text part of the rendered receipt.
func BenchmarkTextFromHTML(b *testing.B) {
	c, data := receipt(b)
	out, err := c.Render(NewBindings(data, nil, nil))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out.HTML)))
	b.ReportAllocs()
	for b.Loop() {
		TextFromHTML(out.HTML)
	}
}
