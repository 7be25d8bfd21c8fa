package render

import (
	"regexp"
	"strings"

	"github.com/osteele/liquid/parser"
)

// endsEscaped matches an expression whose last filter already escapes.
var endsEscaped = regexp.MustCompile(`\|\s*(escape|escape_once)\s*$`)

// tickTagSource is inserted at the start of every loop body.
const tickTagSource = "{% " + tickName + " %}"

// rewrite prepares a source for the library before it is parsed, in every
// mode: each for and tablerow body starts with the tick tag (one loop
// iteration counted against the budget), and capture blocks become the
// bounded capture block. In HTML mode every {{ expr }} also becomes
// {% __sendstream_html expr %} (or {{ expr | __sendstream_html }} when
// the expression holds "%}"), keeping whitespace-control markers. Output
// inside {% raw %} is left alone, {{ x }} of a name filled by
// {% capture x %} is not escaped again (its inner objects already were),
// nor is an expression that ends with the escape or escape_once filter.
// authored undoes all of it in messages.
func rewrite(src string, mode Mode) string {
	toks := parser.Scan(src, parser.SourceLoc{}, nil)
	var b strings.Builder
	b.Grow(len(src) + 32)
	captured := map[string]bool{}
	inRaw, inComment := false, false
	for _, t := range toks {
		switch t.Type {
		case parser.TextTokenType:
			b.WriteString(t.Source)
		case parser.TagTokenType:
			if inRaw || inComment {
				inRaw = inRaw && t.Name != "endraw"
				inComment = inComment && t.Name != "endcomment"
				b.WriteString(t.Source)
				continue
			}
			switch t.Name {
			case "raw":
				inRaw = true
			case "comment":
				inComment = true
			case "capture", "endcapture":
				if t.Name == "capture" {
					captured[strings.TrimSpace(t.Args)] = true
				}
				i := strings.Index(t.Source, t.Name)
				b.WriteString(t.Source[:i] + strings.Replace(t.Name, "capture", captureName, 1) + t.Source[i+len(t.Name):])
				continue
			}
			b.WriteString(t.Source)
			if t.Name == "for" || t.Name == "tablerow" {
				b.WriteString(tickTagSource)
			}
		case parser.ObjTokenType:
			args := strings.TrimSpace(t.Args)
			if mode != HTML || inRaw || inComment || captured[args] || endsEscaped.MatchString(args) {
				b.WriteString(t.Source)
				continue
			}
			lead, trail := " ", " " // with the whitespace-control markers
			if strings.HasPrefix(t.Source, "{{-") {
				lead = "- "
			}
			if strings.HasSuffix(t.Source, "-}}") {
				trail = " -"
			}
			if strings.Contains(args, "%}") { // a tag cannot hold it
				b.WriteString("{{" + lead + args + " | " + escapeName + trail + "}}")
			} else {
				b.WriteString("{%" + lead + escapeName + " " + args + trail + "%}")
			}
		}
		// Trim tokens carry no source: the markers are inside the
		// neighbouring object or tag source.
	}
	return b.String()
}
