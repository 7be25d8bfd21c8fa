package email

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"strconv"
	"sync"
	"testing"
)

// TestFastRSAMatchesCryptoRSA checks the signer DKIM keys get against
// crypto/rsa: PKCS #1 v1.5 signatures are deterministic, so both must give
// the same bytes, from concurrent callers too, and other hashes and PSS
// must still sign.
func TestFastRSAMatchesCryptoRSA(t *testing.T) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s := fastRSA(k)
	if _, ok := s.Public().(*rsa.PublicKey); !ok {
		t.Fatalf("Public() is %T, want *rsa.PublicKey (go-msgauth picks rsa-sha256 by it)", s.Public())
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				d := sha256.Sum256([]byte(strconv.Itoa(g*100 + i)))
				got, err := s.Sign(rand.Reader, d[:], crypto.SHA256)
				if err != nil {
					t.Error(err)
					return
				}
				want, _ := rsa.SignPKCS1v15(nil, k, crypto.SHA256, d[:])
				if !bytes.Equal(got, want) {
					t.Errorf("signature %d/%d differs from crypto/rsa's", g, i)
					return
				}
			}
		}()
	}
	wg.Wait()
	d := sha512.Sum512([]byte("x"))
	sig, err := s.Sign(rand.Reader, d[:], crypto.SHA512)
	if err != nil || rsa.VerifyPKCS1v15(&k.PublicKey, crypto.SHA512, d[:], sig) != nil {
		t.Errorf("SHA-512 signature: %v", err)
	}
	d2 := sha256.Sum256([]byte("y"))
	pss := &rsa.PSSOptions{Hash: crypto.SHA256}
	sig, err = s.Sign(rand.Reader, d2[:], pss)
	if err != nil || rsa.VerifyPSS(&k.PublicKey, crypto.SHA256, d2[:], sig, pss) != nil {
		t.Errorf("PSS signature: %v", err)
	}
}

// BenchmarkRSASign compares one RSA-2048 PKCS #1 v1.5 signature by
// crypto/rsa and by the signer DKIM keys get.
func BenchmarkRSASign(b *testing.B) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	d := sha256.Sum256([]byte("message"))
	for _, s := range []struct {
		name string
		s    crypto.Signer
	}{{"crypto-rsa", k}, {"fast", fastRSA(k)}} {
		b.Run(s.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.s.Sign(rand.Reader, d[:], crypto.SHA256); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
