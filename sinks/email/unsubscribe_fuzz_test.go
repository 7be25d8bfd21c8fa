package email

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzVerifyUnsubscribe: an unsubscribe token (the path of a public page)
// names exactly what was signed: Sign then Verify gives the same
// workspace, address, contact and message back (for valid UTF-8 and a
// workspace and address present, else it is refused), changing one
// character never makes it name someone else, and any other string is
// refused without a panic.
func FuzzVerifyUnsubscribe(f *testing.F) {
	f.Add("ws1", "a@example.com", "c1", "m1", "", 0, byte('x'))
	f.Add("", "a@example.com", "", "", "x.y", 3, byte('A'))
	f.Add("w", "ü@exämple.com", "\x00", "\"}", strings.Repeat("a", 1000)+".", 7, byte('.'))
	const secret = "fuzz-secret"
	f.Fuzz(func(t *testing.T, ws, addr, contact, msg, other string, pos int, c byte) {
		if u, err := VerifyUnsubscribe(secret, other); err == nil && (u.Workspace == "" || u.Email == "") {
			t.Fatalf("%q verified without workspace or address: %+v", other, u)
		}
		in := Unsubscribe{Workspace: ws, Email: addr, ContactID: contact, MessageID: msg}
		tok := SignUnsubscribe(secret, in)
		got, err := VerifyUnsubscribe(secret, tok)
		valid := utf8.ValidString(ws + addr + contact + msg)
		switch {
		case ws == "" || addr == "":
			if err == nil {
				t.Fatalf("token of %+v verifies as %+v", in, got)
			}
		case valid && (err != nil || got != in):
			t.Fatalf("Sign(%+v) verifies as %+v, %v", in, got, err)
		}
		if _, err := VerifyUnsubscribe("other-secret", tok); err == nil {
			t.Fatalf("a token verifies under another secret")
		}
		b := []byte(tok)
		if pos < 0 {
			pos = -pos
		}
		b[pos%len(b)] = c
		if u, err := VerifyUnsubscribe(secret, string(b)); err == nil && u != got {
			t.Fatalf("%q changed to %q verifies as %+v, not %+v", tok, b, u, got)
		}
	})
}
