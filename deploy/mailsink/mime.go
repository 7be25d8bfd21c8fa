package mailsink

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"strings"
)

// maxDepth bounds the nesting of multipart bodies that Parse descends into.
const maxDepth = 16

// HeaderField is one header line, unfolded and decoded, in message order.
type HeaderField struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Attachment describes a body part that is neither the text nor the HTML
// body: an attachment or an inline resource.
type Attachment struct {
	Filename    string `json:"filename,omitempty"`
	ContentType string `json:"contentType"`
	ContentID   string `json:"contentId,omitempty"`
	Size        int64  `json:"size"` // decoded bytes
}

// Content is the readable content of one message.
type Content struct {
	Headers     []HeaderField `json:"headers"`
	Text        string        `json:"text"` // the first text/plain body, decoded to UTF-8
	HTML        string        `json:"html"` // the first text/html body, decoded to UTF-8
	Attachments []Attachment  `json:"attachments"`
}

var wordDecoder = &mime.WordDecoder{CharsetReader: charsetReader}

// decodeHeader decodes RFC 2047 encoded words; a value that fails to decode
// is returned as it is.
func decodeHeader(v string) string {
	d, err := wordDecoder.DecodeHeader(v)
	if err != nil {
		return strings.ToValidUTF8(v, "\uFFFD")
	}
	return strings.ToValidUTF8(d, "\uFFFD")
}

// metaOf fills the header fields of a Meta from a raw message, as far as the
// message can be parsed: the sink accepts everything, parseable or not.
func metaOf(raw []byte) Meta {
	m := Meta{From: []Address{}, To: []Address{}, RcptTo: []string{}}
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return m
	}
	h := msg.Header
	m.From = addresses(h, "From")
	m.To = addresses(h, "To")
	if cc := addresses(h, "Cc"); len(cc) > 0 {
		m.Cc = cc
	}
	m.Subject = decodeHeader(h.Get("Subject"))
	m.Date = h.Get("Date")
	m.MessageID = h.Get("Message-Id")
	return m
}

// addresses parses an address-list header; when it does not parse, its
// decoded text is returned as one address so that nothing is hidden.
func addresses(h mail.Header, name string) []Address {
	v := h.Get(name)
	out := []Address{}
	if strings.TrimSpace(v) == "" {
		return out
	}
	p := mail.AddressParser{WordDecoder: wordDecoder}
	list, err := p.ParseList(v)
	if err != nil {
		return append(out, Address{Address: decodeHeader(v)})
	}
	for _, a := range list {
		out = append(out, Address{Name: a.Name, Address: a.Address})
	}
	return out
}

// Parse extracts the headers, the text and HTML bodies and the list of
// attachments of a raw message with the standard library's MIME readers.
// Parts that do not parse are skipped; an error is returned only when the
// message has no header block at all.
func Parse(raw []byte) (Content, error) {
	c := Content{Headers: headerFields(raw), Attachments: []Attachment{}}
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return c, fmt.Errorf("mailsink: parse message: %w", err)
	}
	walk(textproto.MIMEHeader(msg.Header), msg.Body, 0, &c)
	return c, nil
}

// walk visits one entity: a multipart entity's parts recursively, a leaf
// into c.Text, c.HTML or c.Attachments.
func walk(h textproto.MIMEHeader, body io.Reader, depth int, c *Content) {
	ct, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		ct, params = "text/plain", map[string]string{}
	}
	disp, dparams, _ := mime.ParseMediaType(h.Get("Content-Disposition"))
	if strings.HasPrefix(ct, "multipart/") && depth < maxDepth {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if err != nil {
				return // io.EOF, or a broken boundary: keep what was read
			}
			walk(p.Header, p, depth+1, c)
		}
	}
	data, err := io.ReadAll(transferDecoder(h.Get("Content-Transfer-Encoding"), body))
	if err != nil && len(data) == 0 {
		return
	}
	if disp != "attachment" {
		switch {
		case ct == "text/plain" && c.Text == "":
			c.Text = toUTF8(data, params["charset"])
			return
		case ct == "text/html" && c.HTML == "":
			c.HTML = toUTF8(data, params["charset"])
			return
		}
	}
	name := dparams["filename"]
	if name == "" {
		name = params["name"]
	}
	c.Attachments = append(c.Attachments, Attachment{
		Filename:    decodeHeader(name),
		ContentType: ct,
		ContentID:   strings.Trim(h.Get("Content-Id"), "<>"),
		Size:        int64(len(data)),
	})
}

// transferDecoder undoes a Content-Transfer-Encoding.
func transferDecoder(cte string, r io.Reader) io.Reader {
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "base64":
		return base64.NewDecoder(base64.StdEncoding, r) // ignores line breaks
	case "quoted-printable":
		return quotedprintable.NewReader(r)
	default:
		return r
	}
}

// toUTF8 converts a body in the named charset to UTF-8. Latin-1 is
// converted (and Windows-1252 read as Latin-1, close enough for a preview);
// anything else is taken as UTF-8, with invalid bytes replaced.
func toUTF8(b []byte, charset string) string {
	switch strings.ToLower(charset) {
	case "iso-8859-1", "latin1", "iso_8859-1", "windows-1252", "cp1252":
		var sb strings.Builder
		for _, c := range b {
			sb.WriteRune(rune(c))
		}
		return sb.String()
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// charsetReader lets the word decoder read the legacy charsets toUTF8 knows
// and passes anything else through.
func charsetReader(charset string, r io.Reader) (io.Reader, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return strings.NewReader(toUTF8(b, charset)), nil
}

// headerFields returns the header block's fields in order, unfolded and
// decoded (net/mail keeps them in a map, which loses the order).
func headerFields(raw []byte) []HeaderField {
	out := []HeaderField{}
	br := bufio.NewReader(bytes.NewReader(raw))
	for {
		line, err := br.ReadString('\n')
		trimmed := strings.TrimRight(line, "\r\n")
		if trimmed == "" {
			break // end of the header block (or of the message)
		}
		if (trimmed[0] == ' ' || trimmed[0] == '\t') && len(out) > 0 {
			out[len(out)-1].Value += " " + strings.TrimSpace(trimmed)
		} else if name, value, ok := strings.Cut(trimmed, ":"); ok {
			out = append(out, HeaderField{Name: strings.TrimSpace(name), Value: strings.TrimSpace(value)})
		}
		if err != nil {
			break
		}
	}
	for i := range out {
		out[i].Value = decodeHeader(out[i].Value)
	}
	return out
}
