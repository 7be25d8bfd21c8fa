package render

import (
	"strconv"
	"strings"
	"unsafe"

	"github.com/osteele/liquid/render"
)

// This file renders the templates most email uses without osteele/liquid's
// evaluator: text, {{ path }} and {{ path | default: literal }}, for loops
// over a path (with forloop.* and an else clause), if / elsif / else /
// unless on a path's truth or its == or != to a literal, and comments. The parsed tree is translated
// once, at parse time, into fastNodes; a template that uses anything else
// (another tag or filter, whitespace control, another comparison or and/or
// in a test, a loop's modifiers) gets none and renders through the library. At run
// time a value outside the JSON types (a map written out, an index into a
// map, …) also hands the whole render back to the library, so the output is
// always the library's. TestFastMatchesLiquid checks that over generated
// templates and data.

// fastKind says what a fastNode does.
type fastKind uint8

const (
	fastText  fastKind = iota // write text
	fastValue                 // write the value of expr
	fastFor                   // loop over expr, body per item, alt when it is empty
	fastIf                    // the first branch whose test holds
)

// fastNode is one step of a translated template.
type fastNode struct {
	kind     fastKind
	text     string
	expr     fastExpr
	escape   bool   // fastValue: HTML-escape the value
	name     string // fastFor: the loop variable
	body     []fastNode
	alt      []fastNode   // fastFor: the else clause
	branches []fastBranch // fastIf
}

// fastBranch is one branch of an if: body renders when the test holds
// (does not hold, with negate: unless); an else has no test. The test is
// test's value being truthy, or with op, its comparison with lit.
type fastBranch struct {
	test   *fastExpr
	op     string // "", "==" or "!="
	lit    any    // string or int
	negate bool
	body   []fastNode
}

// fastExpr is a variable path with an optional default filter.
type fastExpr struct {
	root   string
	steps  []fastStep
	hasDef bool
	def    any // string or int, as the library's literals
}

// fastStep is .key or [index].
type fastStep struct {
	key   string
	index int
	isIdx bool
}

// translate turns a parsed template into fastNodes, or reports false when
// it uses anything outside the subset.
func translate(n render.Node, mode Mode) ([]fastNode, bool) {
	var out []fastNode
	ok := appendFast(&out, n, mode)
	return out, ok
}

// translateAll is translate for a list of nodes.
func translateAll(nodes []render.Node, mode Mode) ([]fastNode, bool) {
	var out []fastNode
	for _, c := range nodes {
		if !appendFast(&out, c, mode) {
			return nil, false
		}
	}
	return out, true
}

func appendFast(out *[]fastNode, n render.Node, mode Mode) bool {
	switch n := n.(type) {
	case *render.SeqNode:
		nodes, ok := translateAll(n.Children, mode)
		*out = append(*out, nodes...)
		return ok
	case *render.TextNode:
		*out = append(*out, fastNode{kind: fastText, text: n.Source})
		return true
	case *render.TagNode:
		if n.Name == tickName { // the fast loop counts its iterations itself
			return true
		}
		if n.Name != escapeName || mode != HTML {
			return false
		}
		e, ok := parseFastExpr(n.Args, true)
		*out = append(*out, fastNode{kind: fastValue, expr: e, escape: true})
		return ok
	case *render.ObjectNode:
		if mode == HTML { // raw, captured or escaped by a filter: the library's
			return false
		}
		e, ok := parseFastExpr(n.Args, true)
		*out = append(*out, fastNode{kind: fastValue, expr: e})
		return ok
	case *render.BlockNode:
		return appendFastBlock(out, n, mode)
	}
	return false
}

func appendFastBlock(out *[]fastNode, n *render.BlockNode, mode Mode) bool {
	switch n.Name {
	case "comment":
		return true
	case "for":
		name, coll, ok := parseFastLoop(n.Args)
		if !ok || len(n.Clauses) > 1 || (len(n.Clauses) == 1 && n.Clauses[0].Name != "else") {
			return false
		}
		f := fastNode{kind: fastFor, name: name, expr: coll}
		if f.body, ok = translateAll(n.Body, mode); !ok {
			return false
		}
		if len(n.Clauses) == 1 {
			if f.alt, ok = translateAll(n.Clauses[0].Body, mode); !ok {
				return false
			}
		}
		*out = append(*out, f)
		return true
	case "if", "unless":
		f := fastNode{kind: fastIf}
		for i, cl := range append([]*render.BlockNode{n}, n.Clauses...) {
			var br fastBranch
			switch {
			case i == 0 || cl.Name == "elsif":
				var ok bool
				if br, ok = parseFastTest(cl.Args); !ok {
					return false
				}
				br.negate = i == 0 && n.Name == "unless"
			case cl.Name != "else":
				return false
			}
			var ok bool
			if br.body, ok = translateAll(cl.Body, mode); !ok {
				return false
			}
			f.branches = append(f.branches, br)
		}
		*out = append(*out, f)
		return true
	}
	return false
}

// parseFastTest parses an if's test: "path", or "path == literal" or
// "path != literal" with a string or integer literal.
func parseFastTest(args string) (fastBranch, bool) {
	var br fastBranch
	i := strings.Index(args, "==")
	if j := strings.Index(args, "!="); j >= 0 && (i < 0 || j < i) {
		i = j
	}
	path := args
	if i >= 0 {
		var ok bool
		path, br.op = args[:i], args[i:i+2]
		if br.lit, ok = parseFastLiteral(strings.TrimSpace(args[i+2:])); !ok {
			return br, false
		}
	}
	e, ok := parseFastExpr(path, false)
	br.test = &e
	return br, ok
}

// parseFastLoop parses "item in path".
func parseFastLoop(args string) (string, fastExpr, bool) {
	f := strings.Fields(args)
	if len(f) != 3 || f[1] != "in" || !isFastIdent(f[0]) || f[0] == "forloop" {
		return "", fastExpr{}, false
	}
	e, ok := parseFastExpr(f[2], false)
	return f[0], e, ok
}

// parseFastExpr parses "path" or, with filters, "path | default: literal".
func parseFastExpr(src string, filters bool) (fastExpr, bool) {
	var e fastExpr
	path, filter, hasFilter := strings.Cut(strings.TrimSpace(src), "|")
	if hasFilter && !filters {
		return e, false
	}
	path = strings.TrimSpace(path)
	i := 0
	for i < len(path) && isIdentByte(path[i], i == 0) {
		i++
	}
	e.root = path[:i]
	if !isFastIdent(e.root) {
		return e, false
	}
	for i < len(path) {
		switch path[i] {
		case '.':
			j := i + 1
			for j < len(path) && isIdentByte(path[j], j == i+1) {
				j++
			}
			key := path[i+1 : j]
			if !isFastIdent(key) {
				return e, false
			}
			e.steps = append(e.steps, fastStep{key: key})
			i = j
		case '[':
			j := strings.IndexByte(path[i:], ']')
			if j < 0 {
				return e, false
			}
			n, err := strconv.Atoi(path[i+1 : i+j])
			if err != nil || strings.HasPrefix(path[i+1:i+j], "+") {
				return e, false
			}
			e.steps = append(e.steps, fastStep{index: n, isIdx: true})
			i += j + 1
		default:
			return e, false
		}
	}
	if !hasFilter {
		return e, true
	}
	name, arg, ok := strings.Cut(filter, ":")
	if !ok || strings.TrimSpace(name) != "default" {
		return e, false
	}
	e.hasDef = true
	e.def, ok = parseFastLiteral(strings.TrimSpace(arg))
	return e, ok
}

// parseFastLiteral parses a quoted string (Liquid has no escapes in them)
// or an integer.
func parseFastLiteral(s string) (any, bool) {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		inner := s[1 : len(s)-1]
		return inner, !strings.ContainsRune(inner, rune(s[0]))
	}
	if s == "" || strings.HasPrefix(s, "+") || strings.HasPrefix(s, "-0") || (len(s) > 1 && s[0] == '0') {
		return nil, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return int(n), err == nil
}

// isFastIdent reports a plain identifier that is no keyword.
func isFastIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isIdentByte(s[i], i == 0) {
			return false
		}
	}
	switch s {
	case "true", "false", "nil", "null", "empty", "blank", "and", "or", "contains", "in":
		return false
	}
	return true
}

func isIdentByte(c byte, first bool) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || (!first && '0' <= c && c <= '9')
}

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
