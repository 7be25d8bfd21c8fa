package ingest

import (
	"fmt"
	"sort"
	"strings"
)

// maxParams bounds path parameters per route.
const maxParams = 8

// route is a registered Route with what the hot path needs precomputed.
type route struct {
	Route
	limitName string
	bodyCap   int
	params    []string // parameter names in path order
	metrics   *routeMetrics
}

// node is one path segment of the routing tree. Static children win over
// the parameter child; matching backtracks when a static branch dead-ends.
type node struct {
	static    map[string]*node
	param     *node
	paramName string
	methods   map[string]*route
	allow     string // Allow header: the methods of this path (+ OPTIONS when CORS)
	cors      bool
}

// router matches method and path without regular expressions or
// allocation: segments are compared as byte slices against map keys.
type router struct {
	root node
}

// paramSpan locates one parameter value in the path.
type paramSpan struct{ start, end int }

func (r *router) add(rt *route) error {
	p := rt.Path
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("route %s %s: path must start with /", rt.Method, p)
	}
	n := &r.root
	if p != "/" {
		for _, seg := range strings.Split(p[1:], "/") {
			if seg == "" {
				return fmt.Errorf("route %s %s: empty path segment", rt.Method, p)
			}
			if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
				name := seg[1 : len(seg)-1]
				if name == "" {
					return fmt.Errorf("route %s %s: unnamed parameter", rt.Method, p)
				}
				if n.param == nil {
					n.param = &node{paramName: name}
				} else if n.param.paramName != name {
					return fmt.Errorf("route %s %s: parameter {%s} conflicts with {%s}", rt.Method, p, name, n.param.paramName)
				}
				n = n.param
				rt.params = append(rt.params, name)
				continue
			}
			if strings.ContainsAny(seg, "{}") {
				return fmt.Errorf("route %s %s: a parameter must be a whole segment", rt.Method, p)
			}
			if n.static == nil {
				n.static = map[string]*node{}
			}
			c := n.static[seg]
			if c == nil {
				c = &node{}
				n.static[seg] = c
			}
			n = c
		}
	}
	if len(rt.params) > maxParams {
		return fmt.Errorf("route %s %s: more than %d parameters", rt.Method, p, maxParams)
	}
	if n.methods == nil {
		n.methods = map[string]*route{}
	}
	if _, dup := n.methods[rt.Method]; dup {
		return fmt.Errorf("route %s %s registered twice", rt.Method, p)
	}
	if rt.Method == "OPTIONS" {
		return fmt.Errorf("route %s %s: OPTIONS is answered by the server (set CORS)", rt.Method, p)
	}
	n.methods[rt.Method] = rt
	if n.cors && !rt.CORS || !n.cors && rt.CORS && len(n.methods) > 1 {
		return fmt.Errorf("route %s %s: every method of a path must agree on CORS", rt.Method, p)
	}
	n.cors = rt.CORS
	ms := make([]string, 0, len(n.methods)+1)
	for m := range n.methods {
		ms = append(ms, m)
	}
	if n.cors {
		ms = append(ms, "OPTIONS")
	}
	sort.Strings(ms)
	n.allow = strings.Join(ms, ", ")
	return nil
}

// match finds the node of path and fills spans with its parameter values.
// It returns nil when no route has that path.
func (r *router) match(path []byte, spans *[maxParams]paramSpan) *node {
	if len(path) == 0 || path[0] != '/' {
		return nil
	}
	if len(path) == 1 {
		if r.root.methods != nil {
			return &r.root
		}
		return nil
	}
	return matchFrom(&r.root, path, 1, spans, 0)
}

func matchFrom(n *node, path []byte, i int, spans *[maxParams]paramSpan, np int) *node {
	end := i
	for end < len(path) && path[end] != '/' {
		end++
	}
	seg := path[i:end]
	if len(seg) == 0 {
		return nil // empty segment ("//" or a trailing slash)
	}
	last := end == len(path)
	if c := n.static[string(seg)]; c != nil {
		if last {
			if c.methods != nil {
				return c
			}
		} else if m := matchFrom(c, path, end+1, spans, np); m != nil {
			return m
		}
	}
	if c := n.param; c != nil && np < maxParams {
		spans[np] = paramSpan{i, end}
		if last {
			if c.methods != nil {
				return c
			}
			return nil
		}
		return matchFrom(c, path, end+1, spans, np+1)
	}
	return nil
}
