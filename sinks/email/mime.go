package email

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"path"
	"sort"
	"strings"
	"time"
)

// Address is a mailbox with an optional display name.
type Address struct {
	Email string
	Name  string
}

// Part is one attachment. ContentID set makes it an inline part of a
// multipart/related body, referenced from the HTML as cid:<ContentID>.
type Part struct {
	Filename    string
	ContentType string // "" guesses from the file name
	ContentID   string
	Content     []byte
}

// Content is what Build turns into a message.
type Content struct {
	MessageID string // Message-ID without angle brackets; required
	Date      time.Time
	From      Address
	To        string
	Cc        []string
	ReplyTo   string
	Subject   string
	HTML      string // required
	Text      string // required (the plain-text alternative)
	Parts     []Part
	// ListUnsubscribe is the https one-click unsubscribe URL; when set the
	// message carries List-Unsubscribe and, per RFC 8058,
	// List-Unsubscribe-Post: List-Unsubscribe=One-Click.
	ListUnsubscribe string
	// ListUnsubscribeMailto, when set, is added to List-Unsubscribe as a
	// mailto: alternative.
	ListUnsubscribeMailto string
	// Headers are extra headers (e.g. X-Sendstream-Message-Id), written in
	// the order given after the standard ones.
	Headers [][2]string
}

// Build returns the RFC 5322 message with CRLF line endings:
// multipart/alternative of text and HTML (quoted-printable, UTF-8), wrapped
// in multipart/related when there are inline parts and in multipart/mixed
// when there are attachments (base64). Boundaries derive from the message
// id, so the same content builds the same bytes.
func Build(c Content) ([]byte, error) {
	if c.MessageID == "" || c.From.Email == "" || c.To == "" {
		return nil, errors.New("build message: message id, from and to are required")
	}
	var b bytes.Buffer
	b.Grow(len(c.HTML)*11/10 + len(c.Text)*11/10 + 2048)

	writeHeader(&b, "From", formatAddress(c.From))
	writeHeader(&b, "To", c.To)
	if len(c.Cc) > 0 {
		writeHeader(&b, "Cc", strings.Join(c.Cc, ", "))
	}
	if c.ReplyTo != "" {
		writeHeader(&b, "Reply-To", c.ReplyTo)
	}
	writeHeader(&b, "Subject", encodeText(c.Subject))
	date := c.Date
	if date.IsZero() {
		date = time.Now()
	}
	writeHeader(&b, "Date", date.Format(time.RFC1123Z))
	writeHeader(&b, "Message-ID", "<"+c.MessageID+">")
	writeHeader(&b, "MIME-Version", "1.0")
	if c.ListUnsubscribe != "" {
		v := "<" + c.ListUnsubscribe + ">"
		if c.ListUnsubscribeMailto != "" {
			v += ", <mailto:" + c.ListUnsubscribeMailto + ">"
		}
		writeHeader(&b, "List-Unsubscribe", v)
		writeHeader(&b, "List-Unsubscribe-Post", "List-Unsubscribe=One-Click")
	}
	for _, h := range c.Headers {
		writeHeader(&b, h[0], h[1])
	}

	var inline, attached []Part
	for _, p := range c.Parts {
		if p.ContentID != "" {
			inline = append(inline, p)
		} else {
			attached = append(attached, p)
		}
	}
	bnd := boundaries(c.MessageID)
	alternative := func(w *bytes.Buffer) {
		bd := bnd("alt")
		writeHeader(w, "Content-Type", `multipart/alternative; boundary="`+bd+`"`)
		w.WriteString("\r\n")
		w.WriteString("--" + bd + "\r\n")
		writeTextPart(w, "text/plain; charset=utf-8", c.Text)
		w.WriteString("--" + bd + "\r\n")
		writeTextPart(w, "text/html; charset=utf-8", c.HTML)
		w.WriteString("--" + bd + "--\r\n")
	}
	related := func(w *bytes.Buffer) {
		if len(inline) == 0 {
			alternative(w)
			return
		}
		bd := bnd("rel")
		writeHeader(w, "Content-Type", `multipart/related; type="multipart/alternative"; boundary="`+bd+`"`)
		w.WriteString("\r\n")
		w.WriteString("--" + bd + "\r\n")
		alternative(w)
		for _, p := range inline {
			w.WriteString("--" + bd + "\r\n")
			writeBinaryPart(w, p, true)
		}
		w.WriteString("--" + bd + "--\r\n")
	}
	if len(attached) == 0 {
		related(&b)
		return b.Bytes(), nil
	}
	bd := bnd("mix")
	writeHeader(&b, "Content-Type", `multipart/mixed; boundary="`+bd+`"`)
	b.WriteString("\r\n")
	b.WriteString("--" + bd + "\r\n")
	related(&b)
	for _, p := range attached {
		b.WriteString("--" + bd + "\r\n")
		writeBinaryPart(&b, p, false)
	}
	b.WriteString("--" + bd + "--\r\n")
	return b.Bytes(), nil
}

// boundaries returns a function giving the boundary of one nesting level.
// "=_" cannot occur in quoted-printable or base64 text, so the boundary
// never collides with content.
func boundaries(messageID string) func(level string) string {
	return func(level string) string {
		sum := sha256.Sum256([]byte(level + "\x00" + messageID))
		return "=_ss_" + level + "_" + hex.EncodeToString(sum[:12])
	}
}

func writeTextPart(w *bytes.Buffer, ctype, body string) {
	writeHeader(w, "Content-Type", ctype)
	writeHeader(w, "Content-Transfer-Encoding", "quoted-printable")
	w.WriteString("\r\n")
	w.Grow(len(body) + len(body)/8 + 64) // room for most bodies' escapes and soft breaks
	w.Write(appendQP(w.AvailableBuffer(), body))
	w.WriteString("\r\n")
}

func writeBinaryPart(w *bytes.Buffer, p Part, inline bool) {
	ctype := p.ContentType
	if ctype == "" {
		ctype = mime.TypeByExtension(path.Ext(p.Filename))
	}
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	name := sanitizeHeader(p.Filename)
	writeHeader(w, "Content-Type", mediaType(ctype, "name", name))
	writeHeader(w, "Content-Transfer-Encoding", "base64")
	disp := "attachment"
	if inline {
		disp = "inline"
		writeHeader(w, "Content-ID", "<"+sanitizeHeader(p.ContentID)+">")
	}
	writeHeader(w, "Content-Disposition", mediaType(disp, "filename", name))
	w.WriteString("\r\n")
	enc := make([]byte, base64.StdEncoding.EncodedLen(len(p.Content)))
	base64.StdEncoding.Encode(enc, p.Content)
	for len(enc) > 76 {
		w.Write(enc[:76])
		w.WriteString("\r\n")
		enc = enc[76:]
	}
	if len(enc) > 0 {
		w.Write(enc)
		w.WriteString("\r\n")
	}
}

// mediaType formats the media type t (with any parameters it has, as
// mime.ParseMediaType reads them; application/octet-stream when it cannot)
// and the parameter key=value. A parameter too long for one folded line is
// split into RFC 2231 continuations (key*0*, key*1*, …, percent-encoded
// UTF-8) of at most 70 characters each, so no header line exceeds 998 octets (RFC 5322
// 2.1.1) however long a file name is.
func mediaType(t, key, value string) string {
	mt, params, err := mime.ParseMediaType(t)
	if err != nil {
		mt, params = "application/octet-stream", nil
	}
	if params == nil {
		params = map[string]string{}
	}
	params[key] = value
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(mt)
	for _, k := range keys {
		v := params[k]
		if p := mime.FormatMediaType("x/y", map[string]string{k: v}); p != "" && len(p) <= 73 {
			b.WriteString(p[len("x/y"):]) // "; k=v"
			continue
		}
		seg, cur := 0, "utf-8''"
		flush := func() {
			fmt.Fprintf(&b, "; %s*%d*=%s", k, seg, cur)
			seg, cur = seg+1, ""
		}
		for i := 0; i < len(v); i++ {
			tok := v[i : i+1]
			if c := v[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
				tok = fmt.Sprintf("%%%02X", c)
			}
			if len(cur)+len(tok) > 60 {
				flush()
			}
			cur += tok
		}
		flush()
	}
	return b.String()
}

// writeHeader writes "Name: value" folded at spaces to lines of at most 78
// characters where possible. CR and LF in the value are dropped (header
// injection).
func writeHeader(w *bytes.Buffer, name, value string) {
	value = sanitizeHeader(value)
	line := name + ": "
	col := len(line)
	w.WriteString(line)
	first := true
	for _, word := range strings.Split(value, " ") {
		if !first {
			if col+1+len(word) > 78 && col > len(name)+2 {
				w.WriteString("\r\n ")
				col = 1
			} else {
				w.WriteByte(' ')
				col++
			}
		}
		first = false
		w.WriteString(word)
		col += len(word)
	}
	w.WriteString("\r\n")
}

func sanitizeHeader(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r", "", "\n", " ").Replace(s)
}

// encodeText returns s as is when it is printable ASCII whose words
// (runs without a space) fit a folded header line, else as RFC 2047 encoded
// words, which writeHeader folds between: a subject has no length limit,
// and a header line may not exceed 998 octets (RFC 5322 2.1.1).
func encodeText(s string) string {
	word := 0
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return mime.QEncoding.Encode("utf-8", s)
		}
		if word++; s[i] == ' ' {
			word = 0
		} else if word > maxWord {
			return encodeWords(s)
		}
	}
	return s
}

// maxWord is the longest run without a space that encodeText leaves as is.
const maxWord = 75

// encodeWords returns s as B-encoded words of at most 45 bytes of s each
// (72 characters), split between UTF-8 sequences and separated by spaces.
// Mail readers join adjacent encoded words without the spaces between them.
func encodeWords(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		n := min(len(s), 45)
		for n < len(s) && n > 1 && s[n]&0xc0 == 0x80 {
			n--
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("=?utf-8?b?")
		b.WriteString(base64.StdEncoding.EncodeToString([]byte(s[:n])))
		b.WriteString("?=")
		s = s[n:]
	}
	return b.String()
}

// formatAddress writes a mailbox with its display name quoted or encoded.
func formatAddress(a Address) string {
	if a.Name == "" {
		return a.Email
	}
	for i := 0; i < len(a.Name); i++ {
		if a.Name[i] < 0x20 || a.Name[i] > 0x7e {
			// B encoding: Q encoding leaves specials like " that a phrase
			// cannot hold.
			return mime.BEncoding.Encode("utf-8", sanitizeHeader(a.Name)) + " <" + a.Email + ">"
		}
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(a.Name) + `" <` + a.Email + ">"
}

// InsertPreheader puts the preheader (the inbox preview line) as a hidden
// block at the start of the HTML body. text is plain text; it is escaped.
func InsertPreheader(html, text string) string {
	if text == "" {
		return html
	}
	block := `<div style="display:none;max-height:0;overflow:hidden;mso-hide:all" aria-hidden="true">` + escapeHTML(text) + `</div>`
	if i := indexBodyOpen(html); i >= 0 {
		return html[:i] + block + html[i:]
	}
	return block + html
}

// AppendFooter inserts footer HTML before </body>, or at the end.
func AppendFooter(html, footer string) string {
	if i := strings.LastIndex(strings.ToLower(html), "</body"); i >= 0 {
		return html[:i] + footer + html[i:]
	}
	return html + footer
}

// indexBodyOpen returns the index just after the <body …> tag, or -1.
func indexBodyOpen(html string) int {
	lower := strings.ToLower(html)
	i := strings.Index(lower, "<body")
	if i < 0 {
		return -1
	}
	j := strings.IndexByte(lower[i:], '>')
	if j < 0 {
		return -1
	}
	return i + j + 1
}

func escapeHTML(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(s)
}

// FormatMessageID returns a Message-ID (without angle brackets) for a
// service message id and the sender's domain.
func FormatMessageID(id, domain string) string {
	if domain == "" {
		domain = "sendstream.local"
	}
	return fmt.Sprintf("%s@%s", id, domain)
}
