package contacts

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Errors of Signer.Verify.
var (
	ErrTokenInvalid = errors.New("confirmation link is not valid")
	ErrTokenExpired = errors.New("confirmation link has expired")
)

// Signer makes and checks double opt-in confirmation tokens: the workspace,
// the contact and an expiry time, signed with HMAC-SHA256 under a key derived
// from the server secret (SENDSTREAM_SECRET), so no token needs storing and
// any process with the same secret can check it. A token confirms every
// pending list of its contact, so one link per sign-up suffices.
type Signer struct {
	key []byte
	ttl time.Duration
	now func() time.Time
}

// DefaultTokenTTL is how long a confirmation link works.
const DefaultTokenTTL = 7 * 24 * time.Hour

// NewSigner returns a Signer for secret (non-empty; use 32 or more random
// characters) whose tokens expire after ttl (DefaultTokenTTL when 0).
func NewSigner(secret string, ttl time.Duration) (*Signer, error) {
	if secret == "" {
		return nil, errors.New("confirmation signer: the server secret is empty (set SENDSTREAM_SECRET)")
	}
	if ttl <= 0 {
		ttl = DefaultTokenTTL
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("sendstream/double-opt-in/v1"))
	return &Signer{key: m.Sum(nil), ttl: ttl, now: time.Now}, nil
}

// Sign returns a token for contact id of ws and the time it expires.
func (s *Signer) Sign(ws, id string) (token string, expires time.Time) {
	expires = s.now().Add(s.ttl).Truncate(time.Second)
	payload := ws + "\x00" + id + "\x00" + strconv.FormatInt(expires.Unix(), 10)
	p := base64.RawURLEncoding.EncodeToString([]byte(payload))
	return p + "." + base64.RawURLEncoding.EncodeToString(s.mac(p)), expires
}

// Verify checks a token and returns its workspace and contact id.
// ErrTokenInvalid for anything forged or malformed, ErrTokenExpired for a
// genuine token past its expiry.
func (s *Signer) Verify(token string) (ws, id string, err error) {
	p, sig, ok := strings.Cut(token, ".")
	if !ok || len(token) > 512 {
		return "", "", ErrTokenInvalid
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(p)) {
		return "", "", ErrTokenInvalid
	}
	raw, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return "", "", ErrTokenInvalid
	}
	parts := strings.Split(string(raw), "\x00")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return "", "", ErrTokenInvalid
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return "", "", ErrTokenInvalid
	}
	if s.now().Unix() > exp {
		return "", "", ErrTokenExpired
	}
	return parts[0], parts[1], nil
}

func (s *Signer) mac(payload string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}
