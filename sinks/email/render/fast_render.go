package render

import (
	"strconv"
	"unsafe"
)

// Running the fastNodes that fast.go translates, and the value helpers
// they write with.

// loopState is forloop inside a fast loop.
type loopState struct{ i, n int }

func (l *loopState) prop(key string) any {
	switch key {
	case "first":
		return l.i == 0
	case "last":
		return l.i == l.n-1
	case "index":
		return l.i + 1
	case "index0":
		return l.i
	case "rindex":
		return l.n - l.i
	case "rindex0":
		return l.n - l.i - 1
	case "length":
		return l.n
	}
	return nil
}

// fastRun is the state of one fast render.
type fastRun struct {
	vars   map[string]any
	frames []fastFrame // enclosing loops, innermost last
	m      *meter      // the render's budget
	base   int         // len(dst) when the render started
}

type fastFrame struct {
	name string
	item any
	loop *loopState
}

// renderFast renders nodes onto dst under the default budget; false means
// the library must render the template instead.
func renderFast(dst []byte, nodes []fastNode, vars map[string]any) ([]byte, bool) {
	return renderFastMetered(dst, nodes, vars, newMeter(DefaultBudget()))
}

// renderFastMetered is renderFast counting loop iterations and output
// against m; false with m.err set means a budget was exceeded, false
// without it that the library must render the template instead.
func renderFastMetered(dst []byte, nodes []fastNode, vars map[string]any, m *meter) ([]byte, bool) {
	r := fastRun{vars: vars, m: m, base: len(dst)}
	dst, ok := r.nodes(dst, nodes)
	return dst, ok && r.outputOK(dst)
}

// outputOK checks the output so far against the budget.
func (r *fastRun) outputOK(dst []byte) bool {
	if r.m.out+int64(len(dst)-r.base) > r.m.b.MaxOutputBytes {
		r.m.fail(BudgetOutput)
		return false
	}
	return true
}

func (r *fastRun) nodes(dst []byte, nodes []fastNode) ([]byte, bool) {
	ok := true
	for i := range nodes {
		n := &nodes[i]
		switch n.kind {
		case fastText:
			dst = append(dst, n.text...)
		case fastValue:
			var v any
			if v, ok = r.eval(&n.expr); ok {
				dst, ok = appendValue(dst, v, n.escape)
			}
		case fastFor:
			dst, ok = r.loop(dst, n)
		case fastIf:
			dst, ok = r.cond(dst, n)
		}
		if !ok {
			return dst, false
		}
	}
	return dst, true
}

func (r *fastRun) loop(dst []byte, n *fastNode) ([]byte, bool) {
	v, ok := r.eval(&n.expr)
	if !ok {
		return dst, false
	}
	var items []any
	switch x := v.(type) {
	case nil: // the library renders neither the body nor the else clause
		return dst, true
	case []any:
		items = x
	default: // a map or a string: the library's
		return dst, false
	}
	if len(items) == 0 {
		return r.nodes(dst, n.alt)
	}
	st := &loopState{n: len(items)}
	r.frames = append(r.frames, fastFrame{name: n.name, loop: st})
	top := len(r.frames) - 1
	for i, it := range items {
		if !r.m.iter() || !r.outputOK(dst) {
			return dst, false
		}
		st.i = i
		r.frames[top].item = it
		if dst, ok = r.nodes(dst, n.body); !ok {
			return dst, false
		}
	}
	r.frames = r.frames[:top]
	return dst, true
}

func (r *fastRun) cond(dst []byte, n *fastNode) ([]byte, bool) {
	for i := range n.branches {
		b := &n.branches[i]
		if b.test != nil {
			v, ok := r.eval(b.test)
			if !ok {
				return dst, false
			}
			holds := v != nil && v != false
			if b.op != "" {
				if holds, ok = fastEqual(v, b.lit); !ok {
					return dst, false
				}
				holds = holds == (b.op == "==")
			}
			if holds == b.negate {
				continue
			}
		}
		return r.nodes(dst, b.body)
	}
	return dst, true
}

// eval returns the value of e; false means a value the fast path does not
// know how to treat as the library would.
func (r *fastRun) eval(e *fastExpr) (any, bool) {
	v := r.lookup(e.root)
	for _, s := range e.steps {
		var ok bool
		if v, ok = fastStepInto(v, s); !ok {
			return nil, false
		}
	}
	if e.hasDef {
		empty, ok := fastEmpty(v)
		if !ok {
			return nil, false
		}
		if empty {
			v = e.def
		}
	}
	return v, true
}

// lookup is a root name's value: the innermost loop's variable or
// forloop, else the bindings'.
func (r *fastRun) lookup(root string) any {
	for i := len(r.frames) - 1; i >= 0; i-- {
		f := &r.frames[i]
		if f.name == root {
			return f.item
		}
		if root == "forloop" {
			return f.loop
		}
	}
	return r.vars[root]
}

// fastStepInto is the library's property or index access on a JSON value:
// a map's member, a list's item, first, last or size, a string's size.
func fastStepInto(v any, s fastStep) (any, bool) {
	switch x := v.(type) {
	case nil:
		return nil, true
	case map[string]any:
		if s.isIdx {
			return nil, false
		}
		v, ok := x[s.key]
		return v, ok || s.key != "size" // the library's size of a map without one
	case []any:
		if !s.isIdx {
			return listProp(x, s.key), true
		}
		n := s.index
		if n < 0 {
			n += len(x)
		}
		if n < 0 || n >= len(x) {
			return nil, true
		}
		return x[n], true
	case *loopState:
		if s.isIdx || s.key == "size" {
			return nil, false
		}
		return x.prop(s.key), true
	case string:
		if s.key == "size" && !s.isIdx {
			return len(x), true
		}
		return nil, !s.isIdx
	case bool, int, int64, float64:
		return nil, !s.isIdx
	}
	return nil, false
}

// listProp is a list's first, last or size; other properties are nil.
func listProp(x []any, key string) any {
	switch {
	case key == "size":
		return len(x)
	case len(x) == 0:
		return nil
	case key == "first":
		return x[0]
	case key == "last":
		return x[len(x)-1]
	}
	return nil
}

// fastEqual is the library's == between a JSON value and a string or int
// literal: strings by their bytes, numbers by their value, nothing else
// equal to either.
func fastEqual(v, lit any) (bool, bool) {
	switch x := v.(type) {
	case string:
		l, ok := lit.(string)
		return ok && x == l, true
	case int:
		l, ok := lit.(int)
		return ok && x == l, true
	case int64:
		l, ok := lit.(int)
		return ok && x == int64(l), true
	case float64:
		l, ok := lit.(int)
		return ok && x == float64(l), true
	case nil, bool, []any, map[string]any:
		return false, true
	}
	return false, false
}

// fastEmpty is the default filter's test: nil, false, or an empty string,
// list or map.
func fastEmpty(v any) (bool, bool) {
	switch x := v.(type) {
	case nil:
		return true, true
	case bool:
		return !x, true
	case string:
		return x == "", true
	case []any:
		return len(x) == 0, true
	case map[string]any:
		return len(x) == 0, true
	case int, int64, float64, *loopState:
		return false, true
	}
	return false, false
}

// appendValue writes v the way Liquid writes an object (nil as nothing,
// lists as their items in a row), HTML-escaped when escape is set.
func appendValue(dst []byte, v any, escape bool) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return dst, true
	case string:
		if escape {
			return appendEscaped(dst, x), true
		}
		return append(dst, x...), true
	case bool:
		return strconv.AppendBool(dst, x), true
	case int:
		return strconv.AppendInt(dst, int64(x), 10), true
	case int64:
		return strconv.AppendInt(dst, x, 10), true
	case float64:
		return strconv.AppendFloat(dst, x, 'g', -1, 64), true
	case []any:
		ok := true
		for _, it := range x {
			if dst, ok = appendValue(dst, it, escape); !ok {
				return dst, false
			}
		}
		return dst, true
	}
	return dst, false
}

// appendEscaped appends s escaped as html.EscapeString does.
func appendEscaped(dst []byte, s string) []byte {
	last := 0
	for i := 0; i < len(s); i++ {
		var rep string
		switch s[i] {
		case '&':
			rep = "&amp;"
		case '\'':
			rep = "&#39;"
		case '<':
			rep = "&lt;"
		case '>':
			rep = "&gt;"
		case '"':
			rep = "&#34;"
		default:
			continue
		}
		dst = append(append(dst, s[last:i]...), rep...)
		last = i + 1
	}
	return append(dst, s[last:]...)
}

// bytesString returns b as a string without a copy; b must not change.
func bytesString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}
