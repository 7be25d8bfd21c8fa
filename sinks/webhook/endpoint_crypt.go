package webhook

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

// sealVersion is the first byte of every sealed secret; a later key or
// cipher gets another value, so old rows stay readable.
const sealVersion = 1

// sealInfo binds the derived key to this one use of the server secret.
const sealInfo = "sendstream webhook endpoint secret v1"

// sealer encrypts endpoint secrets at rest with AES-256-GCM under a key
// derived (HKDF-SHA256) from the server secret. A sealed secret is the
// version byte, a random 12-byte nonce and the ciphertext with its tag; the
// endpoint id is the additional data, so a sealed secret copied into
// another endpoint's row does not open. Safe for concurrent use.
type sealer struct {
	aead cipher.AEAD
}

// newSealer derives the key from serverSecret (SENDSTREAM_SECRET or the
// generated local one); it fails on an empty secret.
func newSealer(serverSecret string) (*sealer, error) {
	if serverSecret == "" {
		return nil, errors.New("webhook endpoint secrets: the server secret is empty")
	}
	key, err := hkdf.Key(sha256.New, []byte(serverSecret), nil, sealInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("webhook endpoint secrets: derive key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("webhook endpoint secrets: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("webhook endpoint secrets: %w", err)
	}
	return &sealer{aead: aead}, nil
}

// seal encrypts the secret of endpoint id.
func (s *sealer) seal(id, secret string) ([]byte, error) {
	out := make([]byte, 1+s.aead.NonceSize(), 1+s.aead.NonceSize()+len(secret)+s.aead.Overhead())
	out[0] = sealVersion
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, fmt.Errorf("seal webhook secret: %w", err)
	}
	return s.aead.Seal(out, out[1:], []byte(secret), []byte(id)), nil
}

// open decrypts a secret sealed for endpoint id. It fails when the server
// secret changed since (the operator must rotate the endpoint's secret) or
// the bytes were altered.
func (s *sealer) open(id string, sealed []byte) (string, error) {
	n := s.aead.NonceSize()
	if len(sealed) < 1+n || sealed[0] != sealVersion {
		return "", fmt.Errorf("open secret of webhook endpoint %s: unknown format", id)
	}
	plain, err := s.aead.Open(nil, sealed[1:1+n], sealed[1+n:], []byte(id))
	if err != nil {
		return "", fmt.Errorf("open secret of webhook endpoint %s (was SENDSTREAM_SECRET changed?): %w", id, err)
	}
	return string(plain), nil
}
