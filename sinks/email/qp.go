package email

// qpLine is the longest encoded line before its CRLF (RFC 2045 6.7 (5)).
const qpLine = 76

// appendQP appends s in quoted-printable (RFC 2045 6.7), byte for byte what
// mime/quotedprintable's Writer makes of it (written whole, then closed),
// but copying each run of characters that need no encoding at once instead
// of byte by byte. CR, LF and CRLF end lines as CRLF; a space or tab
// before a line end is encoded; lines are broken softly ("=" CRLF) to stay
// within qpLine.
func appendQP(dst []byte, s string) []byte {
	start := len(dst) // where the current line begins
	cr := false       // the last line end was a CR (its LF is skipped)
	for k := 0; k < len(s); {
		switch b := s[k]; {
		case qpPlain(b):
			j := k + 1
			for j < len(s) && qpPlain(s[j]) {
				j++
			}
			for k < j {
				if len(dst)-start == qpLine-1 {
					dst = append(dst, "=\r\n"...)
					start = len(dst)
				}
				n := min(j-k, qpLine-1-(len(dst)-start))
				dst = append(dst, s[k:k+n]...)
				k += n
			}
			cr = false
		case b == '\r' || b == '\n':
			k++
			if cr && b == '\n' {
				cr = false
				continue
			}
			cr = b == '\r'
			dst = qpEndLine(dst, start)
			dst = append(dst, '\r', '\n')
			start = len(dst)
		default:
			k++
			dst, start = qpEncode(dst, start, b)
		}
	}
	return qpEndLine(dst, start)
}

// qpPlain reports whether b is written as itself: printable ASCII other
// than "=", space and tab.
func qpPlain(b byte) bool { return qpPlainTable[b] }

var qpPlainTable = func() (t [256]bool) {
	for b := range 256 {
		t[b] = b >= '!' && b <= '~' && b != '=' || b == ' ' || b == '\t'
	}
	return t
}()

// qpEncode appends b as "=XX", after a soft line break when the line has
// no room for it; it returns the new start of the current line.
func qpEncode(dst []byte, start int, b byte) ([]byte, int) {
	const hex = "0123456789ABCDEF"
	if qpLine-1-(len(dst)-start) < 3 {
		dst = append(dst, "=\r\n"...)
		start = len(dst)
	}
	return append(dst, '=', hex[b>>4], hex[b&0x0f]), start
}

// qpEndLine encodes a space or tab that would otherwise end the line
// starting at start.
func qpEndLine(dst []byte, start int) []byte {
	if n := len(dst); n > start && (dst[n-1] == ' ' || dst[n-1] == '\t') {
		dst, _ = qpEncode(dst[:n-1], start, dst[n-1])
	}
	return dst
}
