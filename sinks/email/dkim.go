package email

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/emersion/go-msgauth/dkim"
)

// DKIMKey signs mail of one domain.
type DKIMKey struct {
	Domain   string
	Selector string
	Signer   crypto.Signer
}

// dkimHeaders are the header fields signed (RFC 6376 5.4.1, plus the
// unsubscribe headers so they cannot be stripped or replaced in transit).
var dkimHeaders = []string{
	"From", "To", "Cc", "Reply-To", "Subject", "Date", "Message-ID", "MIME-Version",
	"Content-Type", "List-Unsubscribe", "List-Unsubscribe-Post",
}

// Sign returns raw with a DKIM-Signature header prepended (rsa-sha256,
// relaxed/relaxed).
func Sign(raw []byte, key DKIMKey) ([]byte, error) {
	if key.Signer == nil || key.Domain == "" || key.Selector == "" {
		return nil, errors.New("dkim: key, domain and selector are required")
	}
	var out bytes.Buffer
	out.Grow(len(raw) + 512)
	err := dkim.Sign(&out, bytes.NewReader(raw), &dkim.SignOptions{
		Domain:                 key.Domain,
		Selector:               key.Selector,
		Signer:                 key.Signer,
		Hash:                   crypto.SHA256,
		HeaderCanonicalization: dkim.CanonicalizationRelaxed,
		BodyCanonicalization:   dkim.CanonicalizationRelaxed,
		HeaderKeys:             dkimHeaders,
	})
	if err != nil {
		return nil, fmt.Errorf("dkim sign for %s: %w", key.Domain, err)
	}
	return out.Bytes(), nil
}

// GenerateDKIMKey returns a new RSA-2048 key as PKCS#8 PEM and the DNS TXT
// record value publishing its public half ("v=DKIM1; k=rsa; p=…").
func GenerateDKIMKey() (privatePEM, txtRecord string, err error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", fmt.Errorf("generate dkim key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return "", "", fmt.Errorf("encode dkim key: %w", err)
	}
	privatePEM = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	txt, err := DKIMRecord(k.Public())
	return privatePEM, txt, err
}

// DKIMRecord returns the DNS TXT value for a public key.
func DKIMRecord(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encode dkim public key: %w", err)
	}
	return "v=DKIM1; k=rsa; p=" + base64.StdEncoding.EncodeToString(der), nil
}

// ParseDKIMKey reads a PKCS#8 or PKCS#1 PEM private key. An RSA key signs
// through libcrypto when the binary is built with cgo (fastRSA).
func ParseDKIMKey(privatePEM string) (crypto.Signer, error) {
	blk, _ := pem.Decode([]byte(privatePEM))
	if blk == nil {
		return nil, errors.New("dkim key: not PEM")
	}
	if k, err := x509.ParsePKCS8PrivateKey(blk.Bytes); err == nil {
		if rk, ok := k.(*rsa.PrivateKey); ok {
			return fastRSA(rk), nil
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, errors.New("dkim key: not a signing key")
		}
		return s, nil
	}
	k, err := x509.ParsePKCS1PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("dkim key: %w", err)
	}
	return fastRSA(k), nil
}
