package email

import (
	"bytes"
	"mime"
	"strings"
	"testing"
)

// TestAttachmentHeadersFitLines: an attachment's Content-Type and
// Content-Disposition keep every line within 998 octets for the longest
// file name a send accepts (255 characters, non-ASCII ones included, which
// RFC 2231 percent-encodes to six times as long), keep the parameters of a
// contentType such as text/plain; charset=utf-8 (mime.FormatMediaType gave
// an empty header for it), and decode back to the file name.
func TestAttachmentHeadersFitLines(t *testing.T) {
	for _, tc := range []struct{ name, ctype, want string }{
		{"report.pdf", "", "application/pdf"},
		{"notes.txt", "", "text/plain"},
		{"a.txt", "text/plain; charset=utf-8", "text/plain"},
		{strings.Repeat("é", 251) + ".txt", "", "text/plain"},
		{strings.Repeat("a", 251) + ".bin", "application/octet-stream", "application/octet-stream"},
		{strings.Repeat("a b;\"", 50) + ".txt", "", "text/plain"},
	} {
		var b bytes.Buffer
		writeBinaryPart(&b, Part{Filename: tc.name, ContentType: tc.ctype, Content: []byte("x")}, false)
		head, _, _ := strings.Cut(b.String(), "\r\n\r\n")
		for _, l := range strings.Split(head, "\r\n") {
			if len(l) > 998 {
				t.Errorf("%.20q: a header line of %d octets", tc.name, len(l))
			}
		}
		fields := map[string]string{}
		for _, h := range strings.Split(strings.ReplaceAll(head, "\r\n ", " "), "\r\n") {
			k, v, _ := strings.Cut(h, ": ")
			fields[k] = v
		}
		for _, h := range []struct{ header, param, mt string }{{"Content-Type", "name", tc.want}, {"Content-Disposition", "filename", "attachment"}} {
			mt, params, err := mime.ParseMediaType(fields[h.header])
			if err != nil || mt != h.mt || params[h.param] != tc.name {
				t.Errorf("%.20q: %s %.80q: %q %q, %v", tc.name, h.header, fields[h.header], mt, params[h.param], err)
			}
		}
	}
}
