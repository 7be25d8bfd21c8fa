package email

import (
	"bytes"
	"mime/quotedprintable"
	"strings"
	"testing"
)

// stdQP is what mime/quotedprintable's Writer makes of s.
func stdQP(s string) string {
	var b bytes.Buffer
	w := quotedprintable.NewWriter(&b)
	_, _ = w.Write([]byte(s))
	_ = w.Close()
	return b.String()
}

var qpCases = []string{
	"", "plain", "a=b", "trailing space \r\nand tab\t\nend ", "cr\ronly\rlines", "lf\nonly\n",
	"\r\n\r\n", "\r\r\n\n", "\r\xe9\n", "caf\xc3\xa9 \xe2\x82\xac 12,50",
	strings.Repeat("x", 75), strings.Repeat("x", 76), strings.Repeat("x", 200),
	strings.Repeat("x", 73) + "=", strings.Repeat("x", 74) + "\xff", strings.Repeat("x", 74) + " ",
	strings.Repeat("x", 75) + " \r\n", strings.Repeat("ab ", 60), strings.Repeat("\xff", 40),
	"<p style=\"color: red\">Hello&nbsp;Ada</p>\n\t<td>49.00 \xe2\x82\xac</td>  \n",
}

func TestAppendQPMatchesTheStandardWriter(t *testing.T) {
	for _, s := range qpCases {
		if got, want := string(appendQP(nil, s)), stdQP(s); got != want {
			t.Errorf("appendQP(%q)\n got %q\nwant %q", s, got, want)
		}
	}
	// Appending keeps what was there and breaks lines from the new start.
	if got := string(appendQP([]byte("head\r\n"), strings.Repeat("y", 80))); got != "head\r\n"+stdQP(strings.Repeat("y", 80)) {
		t.Errorf("after a prefix: %q", got)
	}
}

func FuzzAppendQP(f *testing.F) {
	for _, s := range qpCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(appendQP(nil, s)), stdQP(s); got != want {
			t.Fatalf("appendQP(%q)\n got %q\nwant %q", s, got, want)
		}
	})
}

func BenchmarkQP(b *testing.B) {
	html := strings.Repeat("<tr><td style=\"padding: 4px 8px\">Green tea, 250 g</td><td>2 \xc3\x97 12,50 \xe2\x82\xac</td></tr>\n", 40)
	b.Run("appendQP", func(b *testing.B) {
		var dst []byte
		for b.Loop() {
			dst = appendQP(dst[:0], html)
		}
	})
	b.Run("quotedprintable", func(b *testing.B) {
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			w := quotedprintable.NewWriter(&buf)
			_, _ = w.Write([]byte(html))
			_ = w.Close()
		}
	})
}
