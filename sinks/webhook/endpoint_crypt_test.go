package webhook

import (
	"bytes"
	"testing"
)

// TestSealer: a sealed secret opens only for its endpoint id, under the
// same server secret and unaltered; the plaintext is not in the sealed
// bytes; two seals of one secret differ (random nonce).
func TestSealer(t *testing.T) {
	s, err := newSealer("server-secret-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	a, err := s.seal("ep1", secret)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.seal("ep1", secret)
	if bytes.Equal(a, b) || bytes.Contains(a, []byte("MfKQ9r8GKYqr")) {
		t.Fatalf("sealed bytes: %x %x", a, b)
	}
	if got, err := s.open("ep1", a); err != nil || got != secret {
		t.Fatalf("open: %q %v", got, err)
	}
	if _, err := s.open("ep2", a); err == nil {
		t.Error("opened for another endpoint id")
	}
	other, _ := newSealer("another-server-secret-0123456789")
	if _, err := other.open("ep1", a); err == nil {
		t.Error("opened under another server secret")
	}
	bad := bytes.Clone(a)
	bad[len(bad)-1] ^= 1
	if _, err := s.open("ep1", bad); err == nil {
		t.Error("opened altered bytes")
	}
	if _, err := s.open("ep1", a[:5]); err == nil {
		t.Error("opened a truncated value")
	}
	if _, err := newSealer(""); err == nil {
		t.Error("empty server secret accepted")
	}
}
