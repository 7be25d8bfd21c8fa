package render

import (
	"errors"
	"strings"

	"github.com/osteele/liquid/render"
)

// collect walks the parsed tree and returns the variable paths it reads.
func collect(root render.Node) ([]string, error) {
	w := walker{seen: map[string]bool{}}
	if err := w.node(root, scope{}); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(w.seen))
	for p := range w.seen {
		out = append(out, p)
	}
	sortStrings(out)
	return out, nil
}

// scope is the set of names bound inside the template at a point.
type scope map[string]bool

func (s scope) with(names ...string) scope {
	n := make(scope, len(s)+len(names))
	for k := range s {
		n[k] = true
	}
	for _, k := range names {
		n[k] = true
	}
	return n
}

type walker struct {
	seen map[string]bool
	// assigned names become local for the rest of the template.
	assigned scope
}

var errInclude = errors.New("the include tag is not supported in email templates")

func (w *walker) node(n render.Node, sc scope) error {
	switch n := n.(type) {
	case *render.SeqNode:
		for _, c := range n.Children {
			if err := w.node(c, sc); err != nil {
				return err
			}
		}
	case *render.ObjectNode:
		w.expr(n.Args, sc)
	case *render.TagNode:
		return w.tag(n.Name, n.Args, sc)
	case *render.BlockNode:
		return w.block(n, sc)
	}
	return nil
}

func (w *walker) tag(name, args string, sc scope) error {
	switch name {
	case escapeName:
		w.expr(args, sc)
	case "include":
		return &SyntaxError{Msg: errInclude.Error()}
	case "assign":
		target, expr, ok := strings.Cut(args, "=")
		if !ok {
			return nil
		}
		w.expr(expr, sc)
		w.bind(strings.TrimSpace(target))
	case "increment", "decrement":
		w.bind(strings.TrimSpace(args))
	case "cycle":
		// {% cycle "group": a, b %}: a leading group name is a string.
		w.expr(args, sc)
	}
	return nil
}

func (w *walker) bind(name string) {
	if w.assigned == nil {
		w.assigned = scope{}
	}
	w.assigned[name] = true
}

func (w *walker) block(n *render.BlockNode, sc scope) error {
	switch n.Name {
	case "raw", "comment":
		return nil
	case captureName:
		name := strings.TrimSpace(n.Args)
		for _, c := range n.Body {
			if err := w.node(c, sc); err != nil {
				return err
			}
		}
		w.bind(name)
		return nil
	case "for", "tablerow":
		// for x in expr [reversed] [limit: n] [offset: n] [cols: n]
		v, rest, _ := strings.Cut(strings.TrimSpace(n.Args), " ")
		rest = strings.TrimSpace(rest)
		rest = strings.TrimPrefix(rest, "in ")
		w.expr(rest, sc)
		inner := sc.with(strings.TrimSpace(v), "forloop", "tablerowloop")
		for _, c := range n.Body {
			if err := w.node(c, inner); err != nil {
				return err
			}
		}
		for _, cl := range n.Clauses {
			if err := w.block(cl, sc); err != nil {
				return err
			}
		}
		return nil
	default: // if, unless, case, when, elsif, else and custom blocks
		w.expr(n.Args, sc)
		for _, c := range n.Body {
			if err := w.node(c, sc); err != nil {
				return err
			}
		}
		for _, cl := range n.Clauses {
			if err := w.block(cl, sc); err != nil {
				return err
			}
		}
	}
	return nil
}

// expr records the variable paths of one Liquid expression.
func (w *walker) expr(src string, sc scope) {
	for _, p := range paths(src) {
		root, _, _ := strings.Cut(p, ".")
		if sc[root] || w.assigned[root] {
			continue
		}
		w.seen[p] = true
	}
}

func sortStrings(s []string) {
	// Insertion sort: variable lists are short.
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
