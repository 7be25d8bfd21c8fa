package baseline

import (
	"strings"
)

// FROZEN: the 4 KB message of the SMTP and DKIM baselines.

const messageBytes = 4096

// message4K returns a 4096-byte RFC 5322 message (CRLF line endings):
// headers, then a quoted-printable-free text body of short lines.
func message4K() []byte {
	var b strings.Builder
	b.WriteString("From: Bench <bench@bench.example.com>\r\n")
	b.WriteString("To: Ada <ada@example.com>\r\n")
	b.WriteString("Subject: Your order & receipt\r\n")
	b.WriteString("Date: Thu, 02 Jan 2025 10:00:00 +0000\r\n")
	b.WriteString("Message-ID: <bench-0001@bench.example.com>\r\n")
	b.WriteString("MIME-Version: 1.0\r\n")
	b.WriteString("Content-Type: text/plain; charset=utf-8\r\n")
	b.WriteString("Content-Transfer-Encoding: 7bit\r\n\r\n")
	line := "Thanks for your order. We are getting it ready and will let you know.\r\n"
	for b.Len()+len(line) <= messageBytes-2 {
		b.WriteString(line)
	}
	for b.Len() < messageBytes-2 {
		b.WriteByte('.')
	}
	b.WriteString("\r\n")
	return []byte(b.String())
}
