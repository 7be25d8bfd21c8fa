package email

import (
	"bytes"
	"mime"
	"strings"
	"testing"
)

// TestLongSubjectFoldsWithinLineLimit: a subject has no length limit (spec
// 4.2 shows none), so one of thousands of characters, with or without
// spaces, ASCII or not, becomes a Subject header whose every line fits 78
// characters where words allow and never exceeds 998 octets, and decodes
// back to the subject.
func TestLongSubjectFoldsWithinLineLimit(t *testing.T) {
	dec := new(mime.WordDecoder)
	for _, subject := range []string{
		"Your order",
		strings.Repeat("x", 5000),
		strings.Repeat("word ", 1000),
		strings.Repeat("é", 3000),
		strings.Repeat("a", 80) + " then € and more " + strings.Repeat("b", 2000),
	} {
		var b bytes.Buffer
		writeHeader(&b, "Subject", encodeText(subject))
		for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\r\n"), "\r\n") {
			if len(line) > 998 {
				t.Fatalf("%.20q...: a header line of %d octets", subject, len(line))
			}
		}
		unfolded := strings.ReplaceAll(strings.TrimPrefix(strings.TrimSuffix(b.String(), "\r\n"), "Subject: "), "\r\n", "")
		got, err := dec.DecodeHeader(unfolded)
		if err != nil || got != subject {
			t.Errorf("%.20q... (%d bytes): decoded %d bytes %.40q, %v", subject, len(subject), len(got), got, err)
		}
	}
}
