package render

import (
	"errors"
	"html"
	"strings"
)

// Source is the Liquid source of one message: subject, preheader, HTML body
// and optional plain-text body.
type Source struct {
	Subject   string
	Preheader string
	HTML      string
	Text      string // empty: derived from the rendered HTML
}

// Compiled is a parsed Source. It is immutable and safe for concurrent use.
type Compiled struct {
	Subject, Preheader, HTML, Text *Template // Preheader and Text nil when empty
	vars                           []string
	skipText                       bool
}

// Variables returns every variable path any part reads, sorted.
func (c *Compiled) Variables() []string { return c.vars }

// Output is a rendered message.
type Output struct {
	Subject   string
	Preheader string
	HTML      string
	Text      string
}

// Compile parses each part (from the cache when seen before) and returns
// the one Compiled of that combination of parts. The error is a
// *SyntaxError naming the part: "subject: …", "html: …".
func (e *Engine) Compile(src Source) (*Compiled, error) {
	c := &Compiled{}
	var err error
	part := func(name, s string, mode Mode) *Template {
		if err != nil {
			return nil
		}
		t, perr := e.Parse(s, mode)
		if perr != nil {
			err = &SyntaxError{Msg: name + ": " + perr.Error()}
		}
		return t
	}
	c.Subject = part("subject", src.Subject, Text)
	if src.Preheader != "" {
		c.Preheader = part("preheader", src.Preheader, Text)
	}
	c.HTML = part("html", src.HTML, HTML)
	if src.Text != "" {
		c.Text = part("text", src.Text, Text)
	}
	if err != nil {
		return nil, err
	}
	// The parts come from the template cache, so a message seen before has
	// the same four pointers: reuse its variable list too.
	key := [4]*Template{c.Subject, c.Preheader, c.HTML, c.Text}
	e.mu.Lock()
	hit := e.compiled[key]
	e.mu.Unlock()
	if hit != nil {
		return hit, nil
	}
	seen := map[string]bool{}
	for _, t := range []*Template{c.Subject, c.Preheader, c.HTML, c.Text} {
		if t == nil {
			continue
		}
		for _, v := range t.vars {
			if !seen[v] {
				seen[v] = true
				c.vars = append(c.vars, v)
			}
		}
	}
	sortStrings(c.vars)
	e.mu.Lock()
	if len(e.compiled) >= e.max {
		clear(e.compiled)
	}
	e.compiled[key] = c
	e.mu.Unlock()
	return c, nil
}

// Render renders every part, all of them under one budget (the engine's:
// loop iterations, output bytes and time are counted across the parts).
// The subject and preheader are single lines (line breaks become spaces); a
// missing text part is derived from the rendered HTML. The error is a
// *RenderError, or a *BudgetError, naming the part.
func (c *Compiled) Render(b Bindings) (Output, error) {
	var out Output
	b, err := b.forRender()
	if err != nil {
		return out, err
	}
	m := newMeter(c.Subject.budget)
	run := func(name string, t *Template) string {
		if err != nil || t == nil {
			return ""
		}
		s, rerr := t.render(b, m)
		var be *BudgetError
		switch {
		case errors.As(rerr, &be):
			named := *be
			named.Part = name
			err = &named
		case rerr != nil:
			err = &RenderError{Msg: name + ": " + rerr.Error()}
		}
		return s
	}
	out.Subject = oneLine(run("subject", c.Subject))
	out.Preheader = oneLine(run("preheader", c.Preheader))
	out.HTML = run("html", c.HTML)
	if c.Text != nil {
		out.Text = run("text", c.Text)
	} else if err == nil && !c.skipText {
		out.Text = TextFromHTML(out.HTML)
	}
	return out, err
}

// Check renders every part as Render does, under the same budget, but does
// not derive a missing text part: it reports whether the message renders
// (a *RenderError or *BudgetError when it does not), at less cost.
func (c *Compiled) Check(b Bindings) error {
	cc := *c
	cc.skipText = true
	_, err := cc.Render(b)
	return err
}

func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n\t") {
		return strings.TrimSpace(s)
	}
	return strings.Join(strings.Fields(s), " ")
}

// TextFromHTML derives a plain-text alternative from an HTML body in one
// pass: head, style, script and title elements and hidden blocks
// (display:none, the preheader) are dropped, links are written as
// "text (url)", <br> and the ends of block elements become line breaks,
// entities are decoded, runs of spaces collapse and blank lines are kept to
// one.
func TextFromHTML(h string) string {
	var b strings.Builder
	b.Grow(len(h) / 2)
	var href string   // of the <a> being written
	var linkStart int // b.Len() when that <a> opened
	hidden := 0       // depth inside a display:none div
	divDepth := 0     // div nesting inside a hidden block
	i := 0
	for i < len(h) {
		c := h[i]
		if c != '<' {
			j := strings.IndexByte(h[i:], '<')
			if j < 0 {
				j = len(h) - i
			}
			if hidden == 0 {
				b.WriteString(h[i : i+j])
			}
			i += j
			continue
		}
		end := strings.IndexByte(h[i:], '>')
		if end < 0 {
			if hidden == 0 {
				b.WriteString(h[i:])
			}
			break
		}
		tag := h[i+1 : i+end]
		i += end + 1
		closing := strings.HasPrefix(tag, "/")
		name := strings.ToLower(tagName(strings.TrimPrefix(tag, "/")))
		switch {
		case !closing && (name == "head" || name == "style" || name == "script" || name == "title"):
			i = skipElement(h, i, name)
		case name == "div" && !closing && (hidden > 0 || isHiddenStyle(tag)):
			if hidden == 0 {
				hidden = 1
				divDepth = 0
			} else {
				divDepth++
			}
		case name == "div" && closing && hidden > 0:
			if divDepth == 0 {
				hidden = 0
			} else {
				divDepth--
			}
		case hidden > 0:
		case name == "br":
			b.WriteByte('\n')
		case name == "a" && !closing:
			href = attr(tag, "href")
			linkStart = b.Len()
		case name == "a" && closing:
			if href != "" {
				text := strings.TrimSpace(b.String()[linkStart:])
				if text == "" || text == href {
					s := b.String()[:linkStart]
					b.Reset()
					b.WriteString(s)
					b.WriteString(href)
				} else {
					b.WriteString(" (" + href + ")")
				}
			}
			href = ""
		case closing && endsBlock(name):
			b.WriteByte('\n')
		}
	}
	return tidyText(html.UnescapeString(b.String()))
}

// endsBlock reports the elements whose end tag ends a line of text.
func endsBlock(name string) bool {
	switch name {
	case "p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "li", "tr", "table", "blockquote", "section", "article", "header", "footer":
		return true
	}
	return false
}

// tagName returns the element name at the start of a tag's text.
func tagName(t string) string {
	for j := 0; j < len(t); j++ {
		switch t[j] {
		case ' ', '\t', '\n', '\r', '/':
			return t[:j]
		}
	}
	return t
}

// isHiddenStyle reports a style attribute with display:none.
func isHiddenStyle(tag string) bool {
	st := strings.ToLower(attr(tag, "style"))
	return strings.Contains(strings.ReplaceAll(st, " ", ""), "display:none")
}

// attr returns a quoted attribute's value from a tag's text.
func attr(tag, name string) string {
	lower := strings.ToLower(tag)
	for from := 0; ; {
		k := strings.Index(lower[from:], name)
		if k < 0 {
			return ""
		}
		k += from
		from = k + len(name)
		if k > 0 && lower[k-1] != ' ' && lower[k-1] != '\t' && lower[k-1] != '\n' {
			continue
		}
		rest := strings.TrimLeft(tag[from:], " \t\n")
		if !strings.HasPrefix(rest, "=") {
			continue
		}
		rest = strings.TrimLeft(rest[1:], " \t\n")
		if rest == "" {
			return ""
		}
		q := rest[0]
		if q != '"' && q != '\'' {
			if e := strings.IndexAny(rest, " \t\n"); e >= 0 {
				return rest[:e]
			}
			return rest
		}
		if e := strings.IndexByte(rest[1:], q); e >= 0 {
			return rest[1 : 1+e]
		}
		return rest[1:]
	}
}

// skipElement returns the index just past the end tag </name…> that
// closes the element whose start tag ends before h[i] (len(h) when none
// does), matching the name in any case.
func skipElement(h string, i int, name string) int {
	for {
		k := strings.Index(h[i:], "</")
		if k < 0 {
			return len(h)
		}
		i += k + 2
		if len(h)-i >= len(name) && strings.EqualFold(h[i:i+len(name)], name) {
			if e := strings.IndexByte(h[i:], '>'); e >= 0 {
				return i + e + 1
			}
			return len(h)
		}
	}
}

// tidyText collapses runs of spaces, tabs and carriage returns into one
// space, trims each line, keeps at most one blank line in a row, and ends
// with one newline.
func tidyText(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 1)
	blank := 0
	started := false
	for len(s) > 0 {
		line := s
		if k := strings.IndexByte(s, '\n'); k >= 0 {
			line, s = s[:k], s[k+1:]
		} else {
			s = ""
		}
		n := b.Len()
		space := false // a space is owed before the next word
		for j := 0; j < len(line); {
			if isBlank(line[j]) {
				space = b.Len() > n
				j++
				continue
			}
			k := j + 1 // the word is line[j:k]
			for k < len(line) && !isBlank(line[k]) {
				k++
			}
			if b.Len() == n && started { // the line's first word
				b.WriteByte('\n')
				if blank > 0 {
					b.WriteByte('\n')
				}
				n = b.Len()
			}
			if space {
				b.WriteByte(' ')
				space = false
			}
			b.WriteString(line[j:k])
			j = k
		}
		switch {
		case b.Len() > n:
			started, blank = true, 0
		case started:
			blank++
		}
	}
	if !started {
		return "\n"
	}
	b.WriteByte('\n')
	return b.String()
}

// isBlank reports the spaces tidyText collapses within a line.
func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }
