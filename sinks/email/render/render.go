// Package render turns Liquid template sources into message text with
// osteele/liquid: it parses each source once (a bounded cache keyed by the
// source's hash, so a changed template is a new entry), HTML-escapes every
// value written into HTML output, lists every variable path a template reads
// by walking the parsed tree, and renders against Bindings built from the
// send's data, the contact and its custom fields. Templates that keep to
// the Liquid most email uses render through a tree of their own, translated
// at parse time (fast.go), several times faster than the library; the rest, and
// any render that meets a value outside that subset, go through the library.
//
// Both the HTTP edge (validation, the variable check of a send) and the
// delivery stage (the final render) use it, so a message renders the same in
// both places. It knows nothing of HTTP or storage.
package render

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/osteele/liquid/parser"
	"github.com/osteele/liquid/render"
	"github.com/osteele/liquid/tags"
)

// Mode says how values are written into the output.
type Mode uint8

const (
	// Text output (subject, preheader, plain-text body): values as they are.
	Text Mode = iota
	// HTML output: every value written by {{ … }} is HTML-escaped.
	HTML
)

// SyntaxError is a template that cannot be parsed (or uses a tag Sendstream
// does not allow). Its message is meant for the API caller.
type SyntaxError struct{ Msg string }

func (e *SyntaxError) Error() string { return e.Msg }

// RenderError is a template that parsed but failed while rendering (a
// filter given a wrong argument, a loop over a non-list, …).
type RenderError struct{ Msg string }

func (e *RenderError) Error() string { return e.Msg }

// Engine parses and caches templates. It is safe for concurrent use; create
// one per process and share it.
type Engine struct {
	cfg    render.Config
	budget Budget
	mu     sync.Mutex
	cache  map[cacheKey]*cacheEntry
	// compiled holds each Compiled by its parts (cached templates); it is
	// emptied when it reaches max entries, and entries whose templates were
	// evicted are unreachable by key and go with it.
	compiled map[[4]*Template]*Compiled
	max      int
	tick     uint64
}

// cacheKey is a source and its mode. The map hashes and compares the
// source itself: no digest to compute, and no collision can hand back
// another template.
type cacheKey struct {
	mode Mode
	src  string
}

type cacheEntry struct {
	t    *Template
	err  error
	used uint64
}

// NewEngine returns an Engine that keeps at most maxCached parsed templates
// (default 4096 when maxCached ≤ 0; the least recently used go first) and
// renders under DefaultBudget.
func NewEngine(maxCached int) *Engine {
	return NewEngineWithBudget(maxCached, DefaultBudget())
}

// NewEngineWithBudget is NewEngine with every render of its templates
// bounded by b (zero fields take their defaults; b must pass Validate).
func NewEngineWithBudget(maxCached int, b Budget) *Engine {
	if maxCached <= 0 {
		maxCached = 4096
	}
	b = b.withDefaults()
	cfg := render.NewConfig()
	tags.AddStandardTags(cfg)
	addBoundedFilters(&cfg, b)
	cfg.AddFilter(escapeName, escapeValue)
	cfg.AddTag(escapeName, compileEscape)
	cfg.AddTag("assign", assignTag)
	cfg.AddTag(tickName, tickTag)
	cfg.AddBlock(captureName).Compiler(captureTag)
	return &Engine{cfg: cfg, budget: b, cache: map[cacheKey]*cacheEntry{}, compiled: map[[4]*Template]*Compiled{}, max: maxCached}
}

// Budget returns the budget every render of the engine's templates has.
func (e *Engine) Budget() Budget { return e.budget }

// Template is one parsed source. Render may be called concurrently.
type Template struct {
	mode   Mode
	root   render.Node
	cfg    *render.Config
	budget Budget
	vars   []string // every variable path read, sorted, without duplicates
	// fast is the template translated for renderFast; nil (with fastOK
	// false) when it uses more of Liquid than renderFast knows.
	fast   []fastNode
	fastOK bool
	// lastLen is the length of the latest output: the next output's buffer
	// starts that large (plus an eighth), so it rarely regrows.
	lastLen atomic.Int64
}

// Variables returns every variable path the template reads (e.g.
// "data.order.id", "name", "contact.first_name", "customField.plan"),
// sorted. Names bound inside the template (loop variables, assign, capture)
// are not listed; their sources are.
func (t *Template) Variables() []string { return t.vars }

// Parse returns the parsed template of src in mode, from the cache when the
// same source was parsed before. A *SyntaxError reports a broken template.
func (e *Engine) Parse(src string, mode Mode) (*Template, error) {
	key := cacheKey{mode: mode, src: src}
	e.mu.Lock()
	e.tick++
	if ent, ok := e.cache[key]; ok {
		ent.used = e.tick
		e.mu.Unlock()
		return ent.t, ent.err
	}
	e.mu.Unlock()

	t, err := e.parse(src, mode)

	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.cache) >= e.max {
		e.evictLocked()
	}
	e.tick++
	key.src = strings.Clone(src) // src may alias a larger buffer, such as a request body
	e.cache[key] = &cacheEntry{t: t, err: err, used: e.tick}
	return t, err
}

// evictLocked drops the least recently used quarter of the cache.
func (e *Engine) evictLocked() {
	n := len(e.cache) / 4
	if n == 0 {
		n = 1
	}
	for ; n > 0; n-- {
		var oldest cacheKey
		var min uint64 = ^uint64(0)
		for k, v := range e.cache {
			if v.used < min {
				min, oldest = v.used, k
			}
		}
		delete(e.cache, oldest)
	}
}

// Cached reports how many parsed templates the cache holds (for tests and
// metrics).
func (e *Engine) Cached() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.cache)
}

func (e *Engine) parse(src string, mode Mode) (*Template, error) {
	if strings.Contains(src, reservedPrefix) {
		return nil, &SyntaxError{Msg: "names starting with " + reservedPrefix + " are reserved"}
	}
	root, serr := e.cfg.Compile(rewrite(src, mode), parser.SourceLoc{})
	if serr != nil {
		return nil, &SyntaxError{Msg: cleanMessage(serr.Error())}
	}
	if err := checkStaticIterations(src, e.budget); err != nil {
		return nil, err
	}
	vars, err := collect(root)
	if err != nil {
		return nil, err
	}
	fast, ok := translate(root, mode)
	return &Template{mode: mode, root: root, cfg: &e.cfg, budget: e.budget, vars: vars, fast: fast, fastOK: ok}, nil
}

// Render renders the template with b under its engine's budget. A
// *RenderError reports a failure of the template itself, a *BudgetError a
// render that exceeded its budget; values the bindings lack render empty.
func (t *Template) Render(b Bindings) (string, error) {
	b, err := b.forRender()
	if err != nil {
		return "", err
	}
	return t.render(b, newMeter(t.budget))
}

// render renders with bindings already prepared, counting against m (one
// meter per message, shared by its parts).
func (t *Template) render(b Bindings, m *meter) (string, error) {
	n := min(t.lastLen.Load(), m.b.MaxOutputBytes)
	if t.fastOK {
		iters := m.iters
		out, ok := renderFastMetered(make([]byte, 0, n+n/8), t.fast, b.m, m)
		if m.err != nil {
			return "", m.err
		}
		if ok {
			m.out += int64(len(out))
			t.lastLen.Store(int64(len(out)))
			return bytesString(out), nil
		}
		m.iters = iters // the library renders it again from the start
	}
	return t.renderLiquid(b, n, m)
}

// renderLiquid renders through osteele/liquid; n is the expected size. The
// meter is bound under a reserved name for the tick, assign and capture
// tags; a budget exceeded inside a filter, or a write refused mid-way
// (which the library answers with a panic), ends the render with m.err;
// any other panic of the library becomes a *RenderError.
func (t *Template) renderLiquid(b Bindings, n int64, m *meter) (s string, err error) {
	var out strings.Builder
	out.Grow(int(n + n/8))
	vars := make(map[string]any, len(b.m)+1)
	for k, v := range b.m {
		vars[k] = v
	}
	vars[meterName] = m
	defer func() {
		if r := recover(); r != nil {
			if p, ok := r.(budgetPanic); ok {
				m.fail(p.kind)
			}
			if m.err != nil {
				s, err = "", m.err
				return
			}
			// A panic inside the library (e.g. its uniq given a null
			// item) is the template's failure, not the process's.
			s, err = "", &RenderError{Msg: cleanMessage(fmt.Sprintf("the template engine failed: %v", r))}
		}
	}()
	rerr := render.Render(t.root, outWriter{m: m, w: &out}, vars, *t.cfg)
	if m.err != nil {
		return "", m.err
	}
	if rerr != nil {
		return "", &RenderError{Msg: cleanMessage(rerr.Error())}
	}
	t.lastLen.Store(int64(out.Len()))
	return out.String(), nil
}

// cleanMessage drops the library's "Liquid error" prefix noise and shows
// an escaped object as the author wrote it, not as rewrite rewrote it.
func cleanMessage(s string) string {
	s = strings.TrimPrefix(s, "Liquid error: ")
	s = strings.TrimPrefix(s, "Liquid exception: ")
	return authored(s)
}

// authored turns what rewrite wrote back into what the author wrote: the
// escape tags and filters into the {{ … }} they came from, without the
// tick tags, capture for the bounded capture.
func authored(s string) string {
	s = strings.ReplaceAll(s, tickTagSource, "")
	s = strings.ReplaceAll(s, captureName, "capture")
	s = strings.ReplaceAll(s, " | "+escapeName, "")
	for _, r := range [][2]string{{"{% " + escapeName + " ", "{{ "}, {"{%- " + escapeName + " ", "{{- "}} {
		for {
			i := strings.Index(s, r[0])
			if i < 0 {
				break
			}
			args := s[i+len(r[0]):]
			j := strings.Index(args, "%}")
			if j < 0 {
				break
			}
			s = s[:i] + r[1] + args[:j] + "}}" + args[j+2:]
		}
	}
	return s
}
