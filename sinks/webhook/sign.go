package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SecretPrefix starts every generated secret (Standard Webhooks).
const SecretPrefix = "whsec_"

// secretBytes is the size of a generated secret's key.
const secretBytes = 24

// Header names of a signed delivery (spec 6).
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
	HeaderLegacy    = "X-Signature-256"
)

// NewSecret returns a fresh secret: "whsec_" and the base64 of 24 random
// bytes.
func NewSecret() (string, error) {
	var b [secretBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate webhook secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b[:]), nil
}

// ValidateSecret checks a secret an operator chose: a "whsec_" secret must
// carry base64 of 24 to 64 bytes; any other must be 16 to 256 printable
// ASCII characters without spaces (its bytes are the key).
func ValidateSecret(s string) error {
	if rest, ok := strings.CutPrefix(s, SecretPrefix); ok {
		key, err := base64.StdEncoding.DecodeString(rest)
		if err != nil || len(key) < 24 || len(key) > 64 {
			return fmt.Errorf("a %s secret must be followed by the base64 of 24 to 64 bytes", SecretPrefix)
		}
		return nil
	}
	if len(s) < 16 || len(s) > 256 {
		return fmt.Errorf("a secret must have 16 to 256 characters")
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return fmt.Errorf("a secret must be printable ASCII without spaces")
		}
	}
	return nil
}

// SecretKey returns the HMAC key of a secret (spec 6): the base64-decoded
// remainder of a "whsec_" secret, otherwise the secret's bytes (also for a
// "whsec_" secret whose remainder is not base64).
func SecretKey(secret string) []byte {
	if rest, ok := strings.CutPrefix(secret, SecretPrefix); ok {
		if key, err := base64.StdEncoding.DecodeString(rest); err == nil {
			return key
		}
	}
	return []byte(secret)
}

// Signature returns one Standard Webhooks signature: "v1," and the base64
// HMAC-SHA256 of "<id>.<unix seconds>.<body>" under key.
func Signature(key []byte, id string, unix int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, unix, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// LegacySignature returns the X-Signature-256 value: "sha256=" and the
// lower-case hex HMAC-SHA256 of the body under key.
func LegacySignature(key, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Signed are the signature headers of one delivery attempt.
type Signed struct {
	ID        string // webhook-id
	Timestamp string // webhook-timestamp, Unix seconds
	Signature string // webhook-signature, one per secret, space-separated
	Legacy    string // X-Signature-256, under the first secret
}

// Sign signs one attempt of message id with every secret (the current one
// first; during a rotation the previous one too, so receivers holding
// either verify it). It returns the zero Signed when there is no secret.
func Sign(secrets []string, id string, at time.Time, body []byte) Signed {
	if len(secrets) == 0 {
		return Signed{}
	}
	unix := at.Unix()
	s := Signed{ID: id, Timestamp: strconv.FormatInt(unix, 10)}
	sigs := make([]string, len(secrets))
	for i, sec := range secrets {
		sigs[i] = Signature(SecretKey(sec), id, unix, body)
	}
	s.Signature = strings.Join(sigs, " ")
	s.Legacy = LegacySignature(SecretKey(secrets[0]), body)
	return s
}

// Headers calls set for each header of s (nothing for the zero Signed).
func (s Signed) Headers(set func(name, value string)) {
	if s.ID == "" {
		return
	}
	set(HeaderID, s.ID)
	set(HeaderTimestamp, s.Timestamp)
	set(HeaderSignature, s.Signature)
	set(HeaderLegacy, s.Legacy)
}
