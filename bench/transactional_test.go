package main

import (
	"bytes"
	"testing"

	"sendstream/sinks/email"
)

// TestSinkVerifiesDKIM checks the DKIM sink's sampled verification: a
// message signed with the published key passes, a changed one does not.
func TestSinkVerifiesDKIM(t *testing.T) {
	pemKey, record, err := email.GenerateDKIMKey()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := email.ParseDKIMKey(pemKey)
	if err != nil {
		t.Fatal(err)
	}
	raw := []byte("From: a@shop.test\r\nTo: b@example.test\r\nSubject: hi\r\n\r\nHello.\r\n")
	signed, err := email.Sign(raw, email.DKIMKey{Domain: "shop.test", Selector: "s1", Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	s := &sink{checkDKIM: true, dkimName: "s1._domainkey.shop.test", dkimRecord: record}
	s.verify(signed)
	if s.verified.Load() != 1 || s.badSig.Load() != 0 {
		t.Fatalf("signed message: %d verified, %d bad (%v)", s.verified.Load(), s.badSig.Load(), s.firstBad.Load())
	}
	s.verify(bytes.Replace(signed, []byte("Hello."), []byte("Hullo."), 1))
	if s.badSig.Load() != 1 {
		t.Fatalf("a changed body verified")
	}
}
