package main

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// biFinding is one failure.
type biFinding struct {
	c       *biCase
	status  int
	body    string
	problem string
}

func (f biFinding) line() string {
	field := f.c.field
	if field == "" {
		field = "(request)"
	}
	return fmt.Sprintf("%s %s · %s · %s → %d %s: %s", f.c.op.method, f.c.op.path, field, f.c.label, f.status, clip(f.body, 300), f.problem)
}

func (r *biRun) record(f biFinding) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.findings = append(r.findings, f)
}

// report renders the findings as Markdown, grouped by operation.
func (r *biRun) report(summary string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# Bad-input suite findings\n\n%s (`go test -count=1 -run TestBadInputSuite .` at the repo root, %s).\n\n", summary, time.Now().UTC().Format(time.RFC3339))
	if len(r.findings) == 0 {
		b.WriteString("No failures.\n")
		return []byte(b.String())
	}
	sorted := append([]biFinding(nil), r.findings...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, c := sorted[i], sorted[j]
		if a.c.op.path+a.c.op.method != c.c.op.path+c.c.op.method {
			return a.c.op.path+a.c.op.method < c.c.op.path+c.c.op.method
		}
		return a.c.field < c.c.field
	})
	op := ""
	for _, f := range sorted {
		if k := f.c.op.method + " " + f.c.op.path; k != op {
			op = k
			fmt.Fprintf(&b, "\n## %s\n\n", op)
		}
		field := f.c.field
		if field == "" {
			field = "(request)"
		}
		fmt.Fprintf(&b, "- `%s` · %s → **%d** `%s`: %s (likely area: %s)\n", field, strings.ToValidUTF8(f.c.label, "?"), f.status,
			strings.ToValidUTF8(clip(f.body, 240), "?"), f.problem, area(f))
	}
	return []byte(b.String())
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// area guesses which part of issue 23 a failure belongs to, for the
// findings file: the HTTP edge (B), contacts, events and the list queries
// (C), email addresses (D), rendering (A), or none of those (E).
func area(f biFinding) string {
	l, p := f.c.label, f.c.op.path
	has := func(subs ...string) bool {
		for _, s := range subs {
			if strings.Contains(l, s) {
				return true
			}
		}
		return false
	}
	switch {
	case strings.Contains(f.problem, "OpenAPI document"):
		return "the OpenAPI fragment of the route"
	case has("NUL", "UTF-8", "surrogate", "control byte", "%00", "%FF", "%ZZ", "Content-", "Authorization", "unknown"),
		f.c.field == "" && f.c.op.custom == nil && !has("base", "refused"):
		return "B (HTTP edge, text rules)"
	case has("address", "IDN"):
		return "D (email rule)"
	case has("Template", "render") || strings.Contains(f.body, "Template error"):
		return "A (render)"
	case strings.HasPrefix(p, "/v1/contacts"), strings.HasPrefix(p, "/v1/lists"), strings.Contains(p, "/events"),
		strings.HasPrefix(p, "/forms"), p == "/confirm", p == "/v1/transactional", strings.HasSuffix(p, "/status"):
		return "C (contacts, events, list queries)"
	}
	return "E (no part's area: send validation, provider reports, tracking, unsubscribe)"
}
