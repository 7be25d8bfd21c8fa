package email

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
)

// Unsubscribe is what a signed unsubscribe link names: the workspace, the
// recipient address, the contact when one exists, and the message it came
// in (for the record).
type Unsubscribe struct {
	Workspace string `json:"w"`
	Email     string `json:"e"`
	ContactID string `json:"c,omitempty"`
	MessageID string `json:"m,omitempty"`
}

// ErrBadToken is returned for a token that is malformed or not signed with
// the secret.
var ErrBadToken = errors.New("invalid or tampered unsubscribe link")

// unsubscribeDomain separates these signatures from other uses of the
// secret.
const unsubscribeDomain = "sendstream unsubscribe v1\x00"

// SignUnsubscribe returns the token of an unsubscribe link:
// base64url(JSON) "." base64url(HMAC-SHA256(secret, domain || JSON)).
// Links do not expire: an unsubscribe link must keep working.
func SignUnsubscribe(secret string, u Unsubscribe) string {
	body, _ := json.Marshal(u)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(unsubscribeDomain))
	mac.Write(body)
	return base64.RawURLEncoding.EncodeToString(body) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// VerifyUnsubscribe checks a token's signature in constant time and returns
// what it names.
func VerifyUnsubscribe(secret, token string) (Unsubscribe, error) {
	var u Unsubscribe
	b64, sig64, ok := strings.Cut(token, ".")
	if !ok || secret == "" {
		return u, ErrBadToken
	}
	body, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil {
		return u, ErrBadToken
	}
	sig, err := base64.RawURLEncoding.DecodeString(sig64)
	if err != nil {
		return u, ErrBadToken
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(unsubscribeDomain))
	mac.Write(body)
	if !hmac.Equal(sig, mac.Sum(nil)) {
		return u, ErrBadToken
	}
	if err := json.Unmarshal(body, &u); err != nil || u.Workspace == "" || u.Email == "" {
		return Unsubscribe{}, ErrBadToken
	}
	return u, nil
}

// UnsubscribeURL returns the one-click link at the site root.
func UnsubscribeURL(siteURL, secret string, u Unsubscribe) string {
	return strings.TrimRight(siteURL, "/") + "/unsubscribe/" + SignUnsubscribe(secret, u)
}
