package render

import (
	"html"
	"regexp"
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

// Compile parses each part (from the cache when seen before). The error is
// a *SyntaxError naming the part: "subject: …", "html: …".
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
	return c, nil
}

// Render renders every part. The subject and preheader are single lines
// (line breaks become spaces); a missing text part is derived from the
// rendered HTML. The error is a *RenderError naming the part.
func (c *Compiled) Render(b Bindings) (Output, error) {
	var out Output
	var err error
	run := func(name string, t *Template) string {
		if err != nil || t == nil {
			return ""
		}
		s, rerr := t.Render(b)
		if rerr != nil {
			err = &RenderError{Msg: name + ": " + rerr.Error()}
		}
		return s
	}
	out.Subject = oneLine(run("subject", c.Subject))
	out.Preheader = oneLine(run("preheader", c.Preheader))
	out.HTML = run("html", c.HTML)
	if c.Text != nil {
		out.Text = run("text", c.Text)
	} else if err == nil {
		out.Text = TextFromHTML(out.HTML)
	}
	return out, err
}

func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n\t") {
		return strings.TrimSpace(s)
	}
	return strings.Join(strings.Fields(s), " ")
}

var (
	reDropped  = regexp.MustCompile(`(?is)<(head|style|script|title)\b.*?</(head|style|script|title)\s*>`)
	reHidden   = regexp.MustCompile(`(?is)<div[^>]*display\s*:\s*none[^>]*>.*?</div\s*>`)
	reBreak    = regexp.MustCompile(`(?i)<br\s*/?>`)
	reBlockEnd = regexp.MustCompile(`(?i)</(p|div|h[1-6]|li|tr|table|blockquote|section|article|header|footer)\s*>`)
	reLink     = regexp.MustCompile(`(?is)<a\b[^>]*\bhref\s*=\s*("([^"]*)"|'([^']*)')[^>]*>(.*?)</a\s*>`)
	reTag      = regexp.MustCompile(`(?s)<[^>]*>`)
	reSpaces   = regexp.MustCompile(`[ \t]+`)
	reBlank    = regexp.MustCompile(`\n\s*\n\s*\n+`)
)

// TextFromHTML derives a plain-text alternative from an HTML body: head,
// style and script dropped, hidden preheader blocks dropped, links written
// as "text (url)", block ends and <br> as line breaks, entities decoded.
func TextFromHTML(h string) string {
	s := reDropped.ReplaceAllString(h, "")
	s = reHidden.ReplaceAllString(s, "")
	s = reLink.ReplaceAllStringFunc(s, func(m string) string {
		g := reLink.FindStringSubmatch(m)
		href := g[2]
		if href == "" {
			href = g[3]
		}
		text := strings.TrimSpace(reTag.ReplaceAllString(g[4], ""))
		if text == "" || text == href {
			return href
		}
		return text + " (" + href + ")"
	})
	s = reBreak.ReplaceAllString(s, "\n")
	s = reBlockEnd.ReplaceAllString(s, "\n")
	s = reTag.ReplaceAllString(s, "")
	s = html.UnescapeString(s)
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = reSpaces.ReplaceAllString(s, " ")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	s = strings.Join(lines, "\n")
	s = reBlank.ReplaceAllString(s, "\n\n")
	return strings.TrimSpace(s) + "\n"
}
