package render

import (
	"strconv"
	"strings"

	"github.com/osteele/liquid/render"
)

// This file and fast_render.go render the templates most email uses
// without osteele/liquid's evaluator: text, {{ path }} and {{ path | default: literal }}, for loops
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
