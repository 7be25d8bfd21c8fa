package render

import (
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/osteele/liquid"
)

// stopBound is how long a render over its budget may take to stop in these
// tests: generous, since they run under the race detector on a loaded
// machine too; what they check is that a budget stops the render at all (a
// render nothing stops runs for minutes or hours), not how fast.
const stopBound = 15 * time.Second

// nestedLoop is the template of issue 23's first defect: 10^10 iterations.
const nestedLoop = `{% for a in (1..100000) %}{% for b in (1..100000) %}x{% endfor %}{% endfor %}`

// renderBudget renders src in mode with data under b and returns the
// output, the error and how long it took. It fails the test unless the
// template takes the wanted path (fast or library).
func renderBudget(t *testing.T, b Budget, src string, mode Mode, data map[string]any, fast bool) (string, error, time.Duration) {
	t.Helper()
	tpl, err := NewEngineWithBudget(0, b).Parse(src, mode)
	if err != nil {
		t.Fatalf("parse %q: %v", src, err)
	}
	if tpl.fastOK != fast {
		t.Fatalf("%q: fast path %v, want %v", src, tpl.fastOK, fast)
	}
	start := time.Now()
	out, err := tpl.Render(NewBindings(data, nil, nil))
	return out, err, time.Since(start)
}

func wantBudget(t *testing.T, err error, kind string) *BudgetError {
	t.Helper()
	var be *BudgetError
	if !errors.As(err, &be) {
		t.Fatalf("error %v (%T), want a *BudgetError of %s", err, err, kind)
	}
	if be.Kind != kind {
		t.Fatalf("budget %q exceeded (%v), want %q", be.Kind, be, kind)
	}
	return be
}

func items(n int) []any {
	l := make([]any, n)
	for i := range l {
		l[i] = float64(i)
	}
	return l
}

func TestBudgetIterations(t *testing.T) {
	cases := []struct {
		name, src string
		data      map[string]any
		fast      bool
	}{
		// limit: keeps these loops out of the parse-time check of literal
		// ranges (TestStaticIterations), so the render's own count stops them.
		{"library nested ranges", `{% for a in (1..100000) limit: 100000 %}{% for b in (1..100000) limit: 100000 %}x{% endfor %}{% endfor %}`, nil, false},
		{"library nested ranges from data", `{% for a in (1..n) %}{% for b in (1..n) %}x{% endfor %}{% endfor %}`, map[string]any{"n": 100000}, false},
		{"library tablerow", `{% tablerow a in (1..100000) limit: 100000 %}{% tablerow b in (1..100000) limit: 100000 %}x{% endtablerow %}{% endtablerow %}`, nil, false},
		{"fast nested lists", `{% for a in list %}{% for b in list %}x{% endfor %}{% endfor %}`, map[string]any{"list": items(2000)}, true},
		{"library range into a filter", `{{ (1..2000000000) | join: "," }}`, nil, false},
		{"library range reversed", `{% assign r = (1..2000000000) | reverse %}{{ r | size }}`, nil, false},
		{"library split", `{{ big | split: "" | size }}`, map[string]any{"big": strings.Repeat("a", 100001)}, false},
	}
	// The library's loop costs about a microsecond an iteration: a tenth of
	// the default keeps the test quick; output and time are left unbounded.
	b := Budget{MaxIterations: 100000, MaxOutputBytes: 1 << 40, Timeout: time.Minute}
	for _, c := range cases {
		for _, mode := range []Mode{Text, HTML} {
			t.Run(c.name, func(t *testing.T) {
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				_, err, took := renderBudget(t, b, c.src, mode, c.data, c.fast)
				be := wantBudget(t, err, BudgetIterations)
				if got := be.Error(); got != "the render exceeded its budget of 100000 loop iterations" {
					t.Fatalf("message %q", got)
				}
				if took > stopBound {
					t.Fatalf("took %s to stop", took)
				}
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				if grew := after.TotalAlloc - before.TotalAlloc; grew > 600<<20 {
					t.Fatalf("allocated %d MB before stopping", grew>>20)
				}
			})
		}
	}
}

func TestBudgetOutput(t *testing.T) {
	big := strings.Repeat("a", 10<<10)
	cases := []struct {
		name, src string
		data      map[string]any
		fast      bool
	}{
		{"fast output bomb", `{% for a in list %}{{ big }}{% endfor %}`, map[string]any{"list": items(1000), "big": big}, true},
		{"library output bomb", `{% for a in (1..1000) %}{{ big | upcase }}{% endfor %}`, map[string]any{"big": big}, false},
		{"doubling with no output", `{% assign s = "xx" %}{% for i in (1..64) %}{% assign s = s | append: s %}{% endfor %}done`, nil, false},
		{"prepend doubling", `{% assign s = "xx" %}{% for i in (1..64) %}{% assign s = s | prepend: s %}{% endfor %}done`, nil, false},
		{"capture doubling", `{% capture s %}xx{% endcapture %}{% for i in (1..64) %}{% capture s %}{{ s }}{{ s }}{% endcapture %}{% endfor %}done`, nil, false},
		{"capture of a long loop", `{% capture s %}{% for i in (1..900000) %}{{ big }}{% endfor %}{% endcapture %}done`, map[string]any{"big": big}, false},
		{"two variables over the budget together", `{% assign a = big | append: "1" %}{% assign b = big | append: "2" %}`, map[string]any{"big": strings.Repeat("b", 3<<20)}, false},
		{"replace bomb", `{{ big | replace: "a", big }}`, map[string]any{"big": big}, false},
		{"join bomb", `{% assign l = "" | split: "," %}{% for i in (1..600) %}{% assign l = l | concat: list %}{% endfor %}{{ l | join: big }}`, map[string]any{"list": []any{"x"}, "big": big}, false},
		{"concat doubling", `{% assign l = list %}{% for i in (1..64) %}{% assign l = l | concat: l %}{% endfor %}`, map[string]any{"list": []any{"x"}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err, took := renderBudget(t, Budget{Timeout: time.Minute}, c.src, HTML, c.data, c.fast)
			var be *BudgetError
			if !errors.As(err, &be) {
				t.Fatalf("error %v (%T), want a *BudgetError", err, err)
			}
			if c.name != "concat doubling" && be.Kind != BudgetOutput {
				t.Fatalf("budget %q (%v), want output", be.Kind, be)
			}
			if c.name == "concat doubling" && be.Kind != BudgetOutput && be.Kind != BudgetIterations {
				t.Fatalf("budget %q (%v)", be.Kind, be)
			}
			if took > stopBound {
				t.Fatalf("took %s to stop", took)
			}
		})
	}
}

func TestBudgetTime(t *testing.T) {
	b := Budget{MaxIterations: 1 << 50, MaxOutputBytes: 1 << 40, Timeout: 100 * time.Millisecond}
	cases := []struct {
		name, src string
		data      map[string]any
		fast      bool
	}{
		{"library", nestedLoop, nil, false},
		{"fast", `{% for a in list %}{% for b in list %}{% if b == 3 %}x{% endif %}{% endfor %}{% endfor %}`, map[string]any{"list": items(100000)}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err, took := renderBudget(t, b, c.src, Text, c.data, c.fast)
			be := wantBudget(t, err, BudgetTime)
			if be.Error() != "the render exceeded its budget of 100ms of render time" {
				t.Fatalf("message %q", be.Error())
			}
			if took < 100*time.Millisecond || took > stopBound {
				t.Fatalf("stopped after %s, want soon after 100ms", took)
			}
		})
	}
}

// The template of issue 23 is refused at parse time: its literal ranges
// alone ask for 10^10 iterations.
func TestStaticIterations(t *testing.T) {
	e := NewEngineWithBudget(0, Budget{})
	for _, mode := range []Mode{Text, HTML} {
		_, err := e.Parse(nestedLoop, mode)
		var se *SyntaxError
		if !errors.As(err, &se) || se.Msg != "its loops over literal ranges ask for 10000000000 iterations, over the render budget of 1000000 loop iterations" {
			t.Fatalf("parse of the nested loop: %v (%T)", err, err)
		}
	}
	cases := []struct {
		src  string
		want int64
	}{
		{`{% for i in (1..10) %}{% endfor %}`, 10},
		{`{% for i in (1..1000) %}{% for j in (1..1000) %}{% endfor %}{% endfor %}{% for k in (5..4) %}{% endfor %}`, 1000000},
		{`{% for i in (1..1000) reversed %}{% for j in list %}{% for k in (1..3) %}{% endfor %}{% endfor %}{% endfor %}`, 3000},
		{`{% for i in (1..1000) limit: 2 %}{% endfor %}`, 1},                // modifiers: judged at render
		{`{% raw %}{% for i in (1..99999999999) %}{% endraw %}`, 0},         // not a loop
		{`{% for i in (1..99999999999999999999) %}{% endfor %}`, 1<<63 - 1}, // beyond int64
		{`{% for i in (-5..5) %}{% endfor %}`, 11},
	}
	for _, c := range cases {
		if got := staticIterations(c.src); got != c.want {
			t.Errorf("staticIterations(%s) = %d, want %d", c.src, got, c.want)
		}
	}
	// At the budget is fine; one over is refused.
	small := NewEngineWithBudget(0, Budget{MaxIterations: 100})
	if _, err := small.Parse(`{% for i in (1..10) %}{% for j in (1..10) %}x{% endfor %}{% endfor %}`, HTML); err != nil {
		t.Fatalf("100 iterations under a budget of 100: %v", err)
	}
	if _, err := small.Parse(`{% for i in (1..101) %}x{% endfor %}`, HTML); err == nil {
		t.Fatal("101 iterations under a budget of 100 parsed")
	}
}

// The nested loop of issue 23, with its bounds from the data so that only
// the render can stop it, stops within the default budget's time, having
// used at most its bytes.
func TestBudgetDefaultStopsTheNestedLoop(t *testing.T) {
	const fromData = `{% for a in (1..n) %}{% for b in (1..n) %}x{% endfor %}{% endfor %}`
	for _, mode := range []Mode{Text, HTML} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err, took := renderBudget(t, Budget{}, fromData, mode, map[string]any{"n": 100000}, false)
		runtime.ReadMemStats(&after)
		var be *BudgetError
		if !errors.As(err, &be) {
			t.Fatalf("error %v, want a budget error", err)
		}
		if took > DefaultRenderTimeout+stopBound {
			t.Fatalf("stopped after %s", took)
		}
		t.Logf("%v after %s, %d MB allocated in all", be, took.Round(time.Millisecond), (after.TotalAlloc-before.TotalAlloc)>>20)
	}
}

// A message shares one budget across its parts and names the part.
func TestBudgetMessage(t *testing.T) {
	e := NewEngineWithBudget(0, Budget{MaxIterations: 1000})
	c, err := e.Compile(Source{Subject: `{% for a in (1..600) %}{% endfor %}Hi`, HTML: `{% for a in (1..600) %}<p>{{ a }}</p>{% endfor %}`})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Render(NewBindings(nil, nil, nil))
	var be *BudgetError
	if !errors.As(err, &be) || be.Error() != "html: the render exceeded its budget of 1000 loop iterations" {
		t.Fatalf("got %v, want the html part's iteration budget", err)
	}
	if err := c.Check(NewBindings(nil, nil, nil)); !errors.As(err, &be) {
		t.Fatalf("Check: %v, want the budget error", err)
	}
	// Within the budget the output is the library's, tick tags and all.
	ok, err := e.Compile(Source{Subject: `{% for a in (1..400) %}{% endfor %}Hi`, HTML: `{% for a in (1..3) %}<p>{{ a }}</p>{% endfor %}`})
	if err != nil {
		t.Fatal(err)
	}
	out, err := ok.Render(NewBindings(nil, nil, nil))
	if err != nil || out.HTML != "<p>1</p><p>2</p><p>3</p>" || out.Subject != "Hi" {
		t.Fatalf("got %+v, %v", out, err)
	}
}

// The tick tags and the bounded capture change no output: templates with
// loops, captures, whitespace control and raw blocks render as plain
// osteele/liquid renders them.
func TestBudgetRewriteKeepsOutput(t *testing.T) {
	lib := liquid.NewEngine()
	srcs := []string{
		`{%- for x in (1..3) -%} {{ x }} {%- endfor -%}!`,
		"{% for x in (1..3) %}\n  {{- x -}}\n{% else %}none{% endfor %}",
		`{% for x in list %}{{ forloop.index }}{% cycle "a", "b" %}{% else %}empty{% endfor %}`,
		`{% tablerow x in (1..5) cols:2 %}{{ x }}{% endtablerow %}`,
		`{% capture c %}{% for x in (1..3) reversed %}{{ x }},{% endfor %}{% endcapture %}[{{ c }}]`,
		`{%- capture c -%} a {%- endcapture -%}[{{ c }}]`,
		`{% raw %}{% for x in (1..3) %}{{ x }}{% endfor %}{% capture y %}{% endraw %}`,
		`{% comment %}{% for x in (1..3) %}{% endcomment %}ok`,
		`{% for x in (1..10) limit:2 offset:3 %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}`,
		`{% assign l = "a,b,c" | split: "," %}{{ l | join: "-" }}{{ l | reverse | first }}{{ "x" | append: "y" | prepend: "w" | replace: "x", "z" }}`,
		`{{ (1..4) | join: "+" }}{{ list | concat: list | size }}{{ "a b  c" | split: " " | size }}`,
	}
	data := map[string]any{"list": []any{"p", "q"}}
	for _, src := range srcs {
		want, lerr := lib.ParseAndRenderString(src, data)
		if lerr != nil {
			t.Fatalf("library %q: %v", src, lerr)
		}
		tpl, err := NewEngine(0).Parse(src, Text)
		if err != nil {
			t.Fatalf("parse %q: %v", src, err)
		}
		got, err := tpl.Render(NewBindings(data, nil, nil))
		if err != nil || got != want {
			t.Fatalf("%q: got %q, %v; the library renders %q", src, got, err, want)
		}
	}
}

func TestBudgetReservedNamesAndMessages(t *testing.T) {
	e := NewEngine(0)
	if _, err := e.Parse(`{{ __sendstream_meter }}`, Text); err == nil {
		t.Fatal("a reserved name parsed")
	}
	tpl, err := e.Parse(`{% for x in (1..2) %}{{ x | divided_by: 0 }}{% endfor %}`, HTML)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tpl.Render(NewBindings(nil, nil, nil))
	var re *RenderError
	if !errors.As(err, &re) || strings.Contains(re.Msg, reservedPrefix) {
		t.Fatalf("render error %v shows the rewrite", err)
	}
	if _, err := e.Parse(`{% capture x %}unclosed`, Text); err == nil || strings.Contains(err.Error(), reservedPrefix) {
		t.Fatalf("syntax error %v shows the rewrite", err)
	}
}

func TestBudgetValidate(t *testing.T) {
	if err := (Budget{MaxIterations: -1}).Validate(); err == nil {
		t.Fatal("negative iterations accepted")
	}
	if err := (Budget{Timeout: -time.Second}).Validate(); err == nil {
		t.Fatal("negative timeout accepted")
	}
	if err := DefaultBudget().Validate(); err != nil {
		t.Fatal(err)
	}
	if got := NewEngineWithBudget(0, Budget{MaxOutputBytes: 10}).Budget(); got.MaxIterations != DefaultMaxIterations || got.MaxOutputBytes != 10 || got.Timeout != DefaultRenderTimeout {
		t.Fatalf("defaults not applied: %+v", got)
	}
}

// BenchmarkCheckReceipt is what a send adds to check the render under the
// budget: the receipt template (the fast path) checked against the send's
// data as JSON, decoded once for the check.
func BenchmarkCheckReceipt(b *testing.B) {
	c, data := receipt(b)
	raw, err := json.Marshal(data)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Check(NewRawBindings(raw, nil, nil)); err != nil {
			b.Fatal(err)
		}
	}
}

// uniq keeps the library's answer without its quadratic loop: 20,000
// distinct objects take one pass.
func TestBudgetUniq(t *testing.T) {
	lib := liquid.NewEngine()
	list := []any{map[string]any{"a": 1.0}, map[string]any{"a": 1.0}, map[string]any{"a": "1"}, []any{1.0, "x"}, []any{1.0, "x"},
		"s", "s", 2.0, 2.0, true, map[string]any{"a": []any{map[string]any{"b": nil}}}, map[string]any{"a": []any{map[string]any{"b": nil}}}}
	src := `{% assign u = list | uniq %}{{ u | size }}|{% for x in u %}{{ x | json }},{% endfor %}`
	want, lerr := lib.ParseAndRenderString(src, map[string]any{"list": list})
	if lerr != nil {
		t.Fatal(lerr)
	}
	// A long time budget: this test is about uniq's result and its growth
	// (the library's was quadratic), not the time budget.
	tpl, err := NewEngineWithBudget(0, Budget{Timeout: time.Minute}).Parse(src, Text)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tpl.Render(NewBindings(map[string]any{"list": list}, nil, nil)); err != nil || got != want {
		t.Fatalf("got %q, %v; the library renders %q", got, err, want)
	}
	long := make([]any, 20000)
	for i := range long {
		long[i] = map[string]any{"id": float64(i)}
	}
	start := time.Now()
	got, err := tpl.Render(NewBindings(map[string]any{"list": long}, nil, nil))
	if err != nil || !strings.HasPrefix(got, "20000|") {
		t.Fatalf("got %.20q, %v", got, err)
	}
	if took := time.Since(start); took > stopBound {
		t.Fatalf("uniq of 20000 objects took %s", took)
	}
	// The library's uniq panicked on a null item; a panic inside the
	// library is a render error, not the process's end.
	if got, err := tpl.Render(NewBindings(map[string]any{"list": []any{nil, "a", nil}}, nil, nil)); err != nil || got != "2|null,\"a\"," {
		t.Fatalf("uniq with nulls: %q, %v", got, err)
	}
}
