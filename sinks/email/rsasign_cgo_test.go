//go:build cgo

package email

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"testing"
)

// TestParseDKIMKeySignsWithLibcrypto checks that RSA keys, PKCS #8 and
// PKCS #1, get the libcrypto signer in a cgo build.
func TestParseDKIMKeySignsWithLibcrypto(t *testing.T) {
	p8, _, err := GenerateDKIMKey()
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode([]byte(p8))
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	p1 := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k.(*rsa.PrivateKey))}))
	for name, key := range map[string]string{"PKCS #8": p8, "PKCS #1": p1} {
		s, err := ParseDKIMKey(key)
		if err != nil {
			t.Fatal(name, err)
		}
		if _, ok := s.(*rsaSigner); !ok {
			t.Errorf("%s: signer %T, want *rsaSigner", name, s)
		}
	}
}
