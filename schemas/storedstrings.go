package schemas

import "sync"

// minStoredString is the length (quotes included) from which a string
// checked in stored input is remembered.
const minStoredString = 512

// maxStoredStrings bounds the bytes storedStrings holds; it starts over
// when full.
const maxStoredStrings = 16 << 20

// storedStrings remembers the long JSON string literals that checks of
// stored input (envelopes read back from the broker, request-log bodies)
// found valid, with whether json.Marshal would escape something in them.
// Those repeat: every envelope of a send carries its template's HTML, and
// the message log and the request log each check it again. A literal is
// remembered by its exact bytes, so a hit is as good as the check.
//
// Only stored input uses it. On a request's own body, how fast the check
// returns would tell the caller whether someone else sent the same string.
var storedStrings stringMemo

type stringMemo struct {
	mu     sync.Mutex
	escape map[string]bool // literal → json.Marshal escapes something in it
	bytes  int
}

// check reports whether the literal lit (quotes included, the closing one
// unescaped) is a valid JSON string, and whether json.Marshal would escape
// something in it.
func (m *stringMemo) check(lit []byte) (escape, valid bool) {
	m.mu.Lock()
	escape, known := m.escape[string(lit)]
	m.mu.Unlock()
	if known {
		return escape, true
	}
	s := lit[1 : len(lit)-1]
	if !validStringSpan(s) {
		return false, false
	}
	escape = marshalEscapes(s)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bytes+len(lit) > maxStoredStrings || m.escape == nil {
		m.escape, m.bytes = map[string]bool{}, 0
	}
	m.escape[string(lit)] = escape
	m.bytes += len(lit)
	return escape, true
}
