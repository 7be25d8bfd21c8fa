package render

import "strings"

// keywords of Liquid expressions and tag arguments that are not variables.
var keywords = map[string]bool{
	"true": true, "false": true, "nil": true, "null": true, "empty": true, "blank": true,
	"and": true, "or": true, "contains": true, "in": true, "reversed": true,
	"limit": true, "offset": true, "cols": true, "with": true, "as": true,
}

// special properties Liquid computes on lists and strings: the path read is
// the value they are taken of.
var specials = map[string]bool{"size": true, "first": true, "last": true}

// paths returns the variable paths an expression reads, in order of
// appearance: `data.order.id`, `items` for `items[0].name`, both `a` and `k`
// for `a[k]`, `user.name` for `user["name"]`. Filter names, named-argument
// keys, keywords and literals are skipped.
func paths(src string) []string {
	var out []string
	i, n := 0, len(src)
	afterPipe := false // the next identifier is a filter name
	for i < n {
		c := src[i]
		switch {
		case c == '"' || c == '\'':
			j := strings.IndexByte(src[i+1:], c)
			if j < 0 {
				return out
			}
			i += j + 2
		case c == '|':
			afterPipe = true
			i++
		case isDigit(c) || (c == '-' && i+1 < n && isDigit(src[i+1])):
			i++
			for i < n && (isDigit(src[i]) || src[i] == '.') {
				if src[i] == '.' && i+1 < n && src[i+1] == '.' { // a range 1..5
					break
				}
				i++
			}
		case isIdentStart(c):
			start := i
			for i < n && isIdentPart(src[i]) {
				i++
			}
			name := src[start:i]
			if afterPipe {
				afterPipe = false
				continue
			}
			// A named argument (`limit: 2`, `default: x`) is a key.
			j := i
			for j < n && src[j] == ' ' {
				j++
			}
			if j < n && src[j] == ':' {
				continue
			}
			if keywords[name] {
				continue
			}
			var p []string
			p, i, out = walkPath(src, i, name, out)
			out = append(out, strings.Join(p, "."))
		default:
			i++
		}
	}
	return out
}

// walkPath follows .prop and [index] after a root name starting at src[i].
// It returns the path parts, the position after them, and out with the
// variables of dynamic indexes appended.
func walkPath(src string, i int, root string, out []string) ([]string, int, []string) {
	p := []string{root}
	n := len(src)
	stopped := false // a numeric or dynamic index ends the static path
	for i < n {
		switch src[i] {
		case '.':
			if i+1 < n && src[i+1] == '.' {
				return p, i, out
			}
			j := i + 1
			for j < n && isIdentPart(src[j]) {
				j++
			}
			if j == i+1 {
				return p, j, out
			}
			prop := src[i+1 : j]
			i = j
			if !stopped && !specials[prop] {
				p = append(p, prop)
			}
			if specials[prop] {
				stopped = true
			}
		case '[':
			end := strings.IndexByte(src[i:], ']')
			if end < 0 {
				return p, n, out
			}
			inner := strings.TrimSpace(src[i+1 : i+end])
			i += end + 1
			if len(inner) >= 2 && (inner[0] == '"' || inner[0] == '\'') && inner[len(inner)-1] == inner[0] {
				if !stopped {
					p = append(p, inner[1:len(inner)-1])
				}
				continue
			}
			stopped = true
			out = append(out, paths(inner)...)
		default:
			return p, i, out
		}
	}
	return p, i, out
}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdentPart(c byte) bool  { return isIdentStart(c) || isDigit(c) || c == '-' || c == '?' }
