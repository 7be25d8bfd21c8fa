package render

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// fastAndLiquid renders src in mode both ways with fresh bindings of data
// (JSON) and reports the fast output and whether the fast path rendered.
func fastAndLiquid(t testing.TB, e *Engine, src string, mode Mode, data string) (fast, lib string, fastOK bool, libErr error) {
	t.Helper()
	tpl, err := e.Parse(src, mode)
	if err != nil {
		return "", "", false, err
	}
	bind := func() Bindings {
		d, _, err := DecodeData([]byte(data))
		if err != nil {
			t.Fatalf("data %s: %v", data, err)
		}
		return NewBindings(d, &Contact{ID: "c1", Email: "ada@example.com", FirstName: "Ada <A>"}, map[string]any{"plan": "pro", "seats": float64(3)})
	}
	if tpl.fastOK {
		out, ok := renderFast(nil, tpl.fast, bind().m)
		fast, fastOK = string(out), ok
	}
	lib, libErr = tpl.renderLiquid(bind(), 0, newMeter(DefaultBudget()))
	return fast, lib, fastOK, libErr
}

// TestFastMatchesLiquid renders generated templates of the fast subset
// (and some beyond it) with generated data, both through renderFast and
// through osteele/liquid, in both modes: whenever the fast path renders, its
// output is the library's, byte for byte.
func TestFastMatchesLiquid(t *testing.T) {
	e := NewEngine(0)
	rng := rand.New(rand.NewPCG(1, 2))
	const cases = 4000
	fastRendered := 0
	for i := 0; i < cases; i++ {
		g := &tplGen{rng: rng}
		src := g.nodes(3)
		data := genData(rng)
		for _, mode := range []Mode{HTML, Text} {
			fast, lib, ok, err := fastAndLiquid(t, e, src, mode, data)
			if !ok {
				continue
			}
			fastRendered++
			if err != nil {
				t.Fatalf("mode %d: the library failed where the fast path rendered\ntemplate: %s\ndata: %s\nerror: %v", mode, src, data, err)
			}
			if fast != lib {
				t.Fatalf("mode %d: outputs differ\ntemplate: %s\ndata: %s\nfast:    %q\nliquid:  %q", mode, src, data, fast, lib)
			}
		}
	}
	// The generator keeps mostly to the subset: most renders must have
	// taken the fast path, or this test compares nothing.
	t.Logf("%d of %d renders took the fast path", fastRendered, 2*cases)
	if fastRendered < cases {
		t.Fatalf("only %d of %d renders took the fast path", fastRendered, 2*cases)
	}
}

// FuzzFastMatchesLiquid is TestFastMatchesLiquid over arbitrary sources and
// data.
func FuzzFastMatchesLiquid(f *testing.F) {
	f.Add(`Hi {{ name | default: "there" }}{% for i in list %}{{ forloop.index }}:{{ i }}{% else %}none{% endfor %}`, `{"name":"<Ada>","list":[1,2.5,"x",null,true]}`)
	f.Add(`{% if a %}A{% elsif b.c %}{{ b.c[0] }}{% else %}E{% endif %}{% unless a %}u{% endunless %}`, `{"a":false,"b":{"c":["q",2]}}`)
	f.Add(`{{ order.items[-1].name }}{% comment %}x{% endcomment %}`, `{"order":{"items":[{"name":"a&b"},{"name":"c'd"}]}}`)
	e := NewEngine(0)
	f.Fuzz(func(t *testing.T, src, data string) {
		var probe map[string]any
		if json.Unmarshal([]byte(data), &probe) != nil || probe == nil {
			return
		}
		for _, mode := range []Mode{HTML, Text} {
			fast, lib, ok, err := fastAndLiquid(t, e, src, mode, data)
			if ok && (err != nil || fast != lib) {
				t.Fatalf("mode %d: fast %q, liquid %q (%v)\ntemplate: %q", mode, fast, lib, err, src)
			}
		}
	})
}

// TestFastSubset pins which templates the fast path takes, so the common
// ones keep taking it, and that the rest still render through the library.
func TestFastSubset(t *testing.T) {
	receiptHTML, err := os.ReadFile("../../../bench/receipt.html")
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(0)
	for _, c := range []struct {
		src  string
		mode Mode
		fast bool
	}{
		{string(receiptHTML), HTML, true},
		{"Your order {{ order.number }} is confirmed", Text, true},
		{`{{ contact.first_name | default: 'friend' }} {{ customField.plan }}`, HTML, true},
		{`{% for x in a %}{% if forloop.last %}.{% endif %}{% endfor %}`, HTML, true},
		{`{{- name -}}`, HTML, false},        // whitespace control
		{`{{ name | upcase }}`, HTML, false}, // another filter
		{`{{ name | escape }}`, HTML, false}, // left unescaped by escapeObjects
		{`{{ list.size }} {{ list.first }} {{ name.size }}`, Text, true},
		{`{% if a == "b" %}x{% elsif n != 2 %}y{% endif %}`, HTML, true},
		{`{% if a > 1 %}x{% endif %}`, HTML, false},          // another comparison
		{`{% if a == "b" and c %}x{% endif %}`, HTML, false}, // and/or
		{`{% for x in a reversed %}{% endfor %}`, HTML, false},
		{`{% for x in (1..3) %}{{ x }}{% endfor %}`, Text, false},
		{`{% assign y = 1 %}{{ y }}`, Text, false},
		{`{% capture c %}x{% endcapture %}{{ c }}`, HTML, false},
		{`{{ "literal" }}`, Text, false},
		{`{% raw %}{{ x }}{% endraw %}`, HTML, false},
	} {
		tpl, err := e.Parse(c.src, c.mode)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		if tpl.fastOK != c.fast {
			t.Errorf("%.60q: fast path %v, want %v", c.src, tpl.fastOK, c.fast)
		}
	}
	// So does every part of the documented example template.
	raw, err := os.ReadFile("../../../deploy/examples/template.json")
	if err != nil {
		t.Fatal(err)
	}
	type parts struct{ Subject, Preheader, HTML, Text string }
	var example struct {
		parts
		Translations map[string]parts
	}
	if err := json.Unmarshal(raw, &example); err != nil {
		t.Fatal(err)
	}
	all := []parts{example.parts}
	for _, tr := range example.Translations {
		all = append(all, tr)
	}
	for _, p := range all {
		for src, mode := range map[string]Mode{p.Subject: Text, p.Preheader: Text, p.HTML: HTML, p.Text: Text} {
			if src == "" {
				continue
			}
			if tpl, err := e.Parse(src, mode); err != nil || !tpl.fastOK {
				t.Errorf("example template part %.60q: not on the fast path (%v)", src, err)
			}
		}
	}
	// The receipt renders on the fast path with its data, too.
	c, data := receipt(t)
	if _, ok := renderFast(nil, c.HTML.fast, NewBindings(data, nil, nil).m); !ok {
		t.Fatal("the receipt fell back to the library")
	}
}

// TestFastHandsBackWhatItCannotWrite: a value the fast path cannot write
// as the library does (a map) makes the whole render the library's.
func TestFastHandsBackWhatItCannotWrite(t *testing.T) {
	e := NewEngine(0)
	c, err := e.Compile(Source{Subject: "s", HTML: `<p>{{ a }}</p><p>{{ m }}</p>`})
	if err != nil {
		t.Fatal(err)
	}
	if !c.HTML.fastOK {
		t.Fatal("the template should be in the fast subset")
	}
	d, _, err := DecodeData([]byte(`{"a":"x<y","m":{"k":"v"}}`))
	if err != nil {
		t.Fatal(err)
	}
	b := NewBindings(d, nil, nil)
	if _, ok := renderFast(nil, c.HTML.fast, b.m); ok {
		t.Fatal("renderFast wrote a map")
	}
	out, err := c.Render(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := `<p>x&lt;y</p><p>map[k:v]</p>`; out.HTML != want {
		t.Fatalf("HTML %q, want %q", out.HTML, want)
	}
}

// tplGen writes random templates, mostly within the fast subset.
type tplGen struct {
	rng   *rand.Rand
	loops []string // loop variables in scope
}

var genPaths = []string{"name", "order.number", "order.items", "order.items[0].name", "order.items[-1].price",
	"order.items[5]", "data.name", "data.order.total", "contact.first_name", "contact.email", "customField.plan",
	"customField.seats", "missing", "missing.x", "flag", "n", "f", "list", "list[1]", "empty_list", "empty_str",
	"obj.k", "nested.deep.v", "zero", "forloop.index", "forloop.first", "name.x", "n.x", "list.x",
	"list.size", "list.first", "list.last", "empty_list.first", "name.size", "order.items.last.name", "obj.size",
	"order.size", "n.size"}

// genRarePaths make the fast path hand the render back (a map written out,
// an index into a scalar or a map, a loop's size).
var genRarePaths = []string{"obj", "flag[0]", "obj[0]", "forloop.size", "order"}

var genTexts = []string{"Hi ", "<b>", "</b>", " & ", "\n", `"q"`, "'", "é", "x", " "}

func (g *tplGen) pick(s []string) string { return s[g.rng.IntN(len(s))] }

func (g *tplGen) path() string {
	if len(g.loops) > 0 && g.rng.IntN(3) == 0 {
		v := g.loops[g.rng.IntN(len(g.loops))]
		switch g.rng.IntN(6) {
		case 0:
			return v
		case 1:
			return "forloop." + g.pick([]string{"index", "index0", "rindex", "rindex0", "first", "last", "length", "other"})
		default:
			return v + "." + g.pick([]string{"name", "quantity", "price", "tags", "x"})
		}
	}
	if g.rng.IntN(40) == 0 {
		return g.pick(genRarePaths)
	}
	return g.pick(genPaths)
}

// test is an if's test: a path, or a path compared with a literal.
func (g *tplGen) test() string {
	if g.rng.IntN(2) == 0 {
		return g.path()
	}
	return g.path() + g.pick([]string{" == ", " != ", "=="}) +
		g.pick([]string{`"Ada"`, `""`, `'Zoë'`, `2`, `0`, `-7`, `3`, `"2"`, `"true"`, `123456789`})
}

func (g *tplGen) nodes(depth int) string {
	var b strings.Builder
	for n := g.rng.IntN(5) + 1; n > 0; n-- {
		b.WriteString(g.node(depth))
	}
	return b.String()
}

func (g *tplGen) node(depth int) string {
	k := g.rng.IntN(10)
	if depth == 0 && k >= 6 {
		k = 0
	}
	switch k {
	case 0, 1:
		return g.pick(genTexts)
	case 2, 3:
		return "{{ " + g.path() + " }}"
	case 4:
		return fmt.Sprintf("{{ %s | default: %s }}", g.path(), g.pick([]string{`"d<&>"`, `'x'`, `5`, `-2`, `""`}))
	case 5:
		if g.rng.IntN(16) == 0 { // outside the subset
			return g.pick([]string{"{{- name -}}", "{{ name | upcase }}", "{{ list.size }}", "{% if n > 1 %}big{% endif %}"})
		}
		return "{% comment %}c{% endcomment %}"
	case 6, 7:
		v := g.pick([]string{"item", "it", "name"})
		coll := g.pick([]string{"order.items", "list", "empty_list", "missing", "item.tags", "nested.deep.list", "order.items"})
		if g.rng.IntN(20) == 0 {
			coll = g.pick([]string{"obj", "name"}) // the library's
		}
		g.loops = append(g.loops, v)
		body := g.nodes(depth - 1)
		g.loops = g.loops[:len(g.loops)-1]
		els := ""
		if g.rng.IntN(3) == 0 {
			els = "{% else %}" + g.nodes(depth-1)
		}
		return "{% for " + v + " in " + coll + " %}" + body + els + "{% endfor %}"
	default:
		tag := g.pick([]string{"if", "if", "unless"})
		s := "{% " + tag + " " + g.test() + " %}" + g.nodes(depth-1)
		if tag == "if" && g.rng.IntN(2) == 0 { // unless takes no elsif
			s += "{% elsif " + g.test() + " %}" + g.nodes(depth-1)
		}
		if g.rng.IntN(2) == 0 {
			s += "{% else %}" + g.nodes(depth-1)
		}
		return s + "{% end" + tag + " %}"
	}
}

// genData returns a data object with values of every JSON type, some
// missing, some empty.
func genData(rng *rand.Rand) string {
	str := func() string {
		return []string{`"Ada"`, `""`, `"<b>&'\""`, `"Zoë"`, `"a\nb"`}[rng.IntN(5)]
	}
	num := func() string {
		return []string{`0`, `2`, `-7`, `12.5`, `3.0`, `1e21`, `0.000001`, `123456789`, `1e400`, `99999999999999999999`}[rng.IntN(10)]
	}
	scalar := func() string {
		switch rng.IntN(5) {
		case 0:
			return str()
		case 1:
			return num()
		case 2:
			return []string{"true", "false"}[rng.IntN(2)]
		case 3:
			return "null"
		}
		return `[` + str() + `,` + num() + `]`
	}
	item := func() string {
		return `{"name":` + str() + `,"quantity":` + num() + `,"price":` + scalar() + `,"tags":[` + str() + `,` + scalar() + `]}`
	}
	var fields []string
	add := func(k, v string) {
		if rng.IntN(6) > 0 {
			fields = append(fields, `"`+k+`":`+v)
		}
	}
	add("name", scalar())
	items := []string{}
	for n := rng.IntN(4); n > 0; n-- {
		items = append(items, item())
	}
	add("order", `{"number":`+scalar()+`,"total":`+num()+`,"items":[`+strings.Join(items, ",")+`]}`)
	add("flag", []string{"true", "false", "null", `"no"`}[rng.IntN(4)])
	add("n", num())
	add("f", num())
	add("zero", "0")
	add("list", `[`+scalar()+`,`+scalar()+`,`+scalar()+`]`)
	add("empty_list", "[]")
	add("empty_str", `""`)
	add("obj", `{"k":`+scalar()+`}`)
	add("nested", `{"deep":{"v":`+scalar()+`,"list":[`+scalar()+`]}}`)
	return "{" + strings.Join(fields, ",") + "}"
}
