// Package oauth holds OAuth 2.0 apps (spec 5.3) and the token side of the
// authorization server: the token endpoint (RFC 6749 with PKCE, RFC 7636),
// revocation (RFC 7009), discovery (RFC 8414), authorization codes, and the
// access tokens that authenticate /v1 calls through ingest/auth like API
// keys. Every secret, code and token is random, shown once, and stored only
// as its SHA-256, like API keys. Importing the package registers the access
// token prefix with ingest/auth.
package oauth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"sendstream/ingest/auth"
)

// Prefixes of what the package mints; each is followed by 40 base62
// characters.
const (
	AccessTokenPrefix  = "ss_oauth_"   // access tokens (Bearer on /v1)
	RefreshTokenPrefix = "ss_refresh_" // refresh tokens
	ClientIDPrefix     = "ss_client_"  // client identifiers (public)
	SecretPrefix       = "ss_cs_"      // client secrets
	CodePrefix         = "ss_code_"    // authorization codes
	randLen            = 40
)

// Client types (spec 5.3 rule 1).
const (
	TypeConfidential = "confidential"
	TypePublic       = "public"
)

// Grant types an app may enable.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
	GrantRefreshToken      = "refresh_token"
)

// Grants lists every grant type.
var Grants = []string{GrantAuthorizationCode, GrantClientCredentials, GrantRefreshToken}

// Constants of spec 8.3 and the code lifetime (RFC 6749 4.1.2 recommends
// at most 10 minutes).
const (
	MaxAppsPerWorkspace = 10
	AccessTokenTTL      = time.Hour
	RefreshTokenTTL     = 90 * 24 * time.Hour
	CodeTTL             = time.Minute
)

// App is one OAuth app of a workspace.
type App struct {
	ID           string   `json:"id"`
	Workspace    string   `json:"workspaceId"`
	Name         string   `json:"name"`
	ClientID     string   `json:"clientId"`
	Type         string   `json:"type"`
	Grants       []string `json:"grants"`
	Scopes       []string `json:"scopes"`
	RedirectURIs []string `json:"redirectUris"`
	CreatedBy    string   `json:"createdBy,omitempty"`
	secretHash   []byte
	suspended    bool // the workspace is suspended (read with the app)
}

// Has reports whether the app enables grant g.
func (a App) Has(g string) bool { return slices.Contains(a.Grants, g) }

// checkSecret compares a presented client secret with the stored hash in
// constant time; public apps never match.
func (a App) checkSecret(secret string) bool {
	if len(a.secretHash) != sha256.Size {
		return false
	}
	h := sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare(h[:], a.secretHash) == 1
}

// Error is an OAuth error of RFC 6749 section 5.2 (or 4.1.2.1): Code is
// the "error" value, Description the "error_description".
type Error struct {
	Code        string
	Description string
}

func (e *Error) Error() string { return e.Code + ": " + e.Description }

// Status is the HTTP status of the error at the token endpoint: 401 for
// invalid_client, 400 otherwise.
func (e *Error) Status() int {
	if e.Code == "invalid_client" {
		return 401
	}
	return 400
}

func oerr(code, format string, args ...any) *Error {
	return &Error{Code: code, Description: fmt.Sprintf(format, args...)}
}

// ValidRedirectURI checks the forms spec 5.3 rule 2 allows: https://… with
// a host, or http://localhost:<port>; never a fragment.
func ValidRedirectURI(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("redirect URI %q: %w", s, err)
	}
	if u.Fragment != "" || strings.Contains(s, "#") {
		return fmt.Errorf("redirect URI %q: must not have a fragment", s)
	}
	switch u.Scheme {
	case "https":
		if u.Hostname() == "" || u.User != nil {
			return fmt.Errorf("redirect URI %q: https URI needs a host and no user info", s)
		}
		return nil
	case "http":
		port, err := strconv.Atoi(u.Port())
		if u.Hostname() == "localhost" && u.User == nil && err == nil && port > 0 && port < 65536 {
			return nil
		}
	}
	return fmt.Errorf("redirect URI %q: allowed forms are https://… and http://localhost:<port>", s)
}

// parseScopes splits a space-separated scope parameter (RFC 6749 3.3) and
// checks every name against the API-key scopes.
func parseScopes(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Fields(s) {
		if !auth.ValidScope(f) {
			return nil, fmt.Errorf("unknown scope %q (valid: %s)", f, strings.Join(auth.Scopes, " "))
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// narrow returns the requested scopes when every one is allowed, all of
// allowed when none are requested, and an invalid_scope error otherwise.
func narrow(requested string, allowed []string) ([]string, *Error) {
	req, err := parseScopes(requested)
	if err != nil {
		return nil, oerr("invalid_scope", "%v", err)
	}
	if len(req) == 0 {
		return slices.Clone(allowed), nil
	}
	for _, s := range req {
		if !slices.Contains(allowed, s) {
			return nil, oerr("invalid_scope", "scope %q is not allowed for this client", s)
		}
	}
	return req, nil
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newToken returns prefix + 40 uniformly random base62 characters and the
// SHA-256 of the whole string.
func newToken(prefix string) (string, [32]byte, error) {
	out := make([]byte, 0, len(prefix)+randLen)
	out = append(out, prefix...)
	var buf [64]byte
	for len(out) < cap(out) {
		if _, err := rand.Read(buf[:]); err != nil {
			return "", [32]byte{}, fmt.Errorf("random token: %w", err)
		}
		for _, b := range buf {
			if b < 248 && len(out) < cap(out) { // 248 = 4*62: uniform
				out = append(out, base62[b%62])
			}
		}
	}
	return string(out), sha256.Sum256(out), nil
}

// s256 is the PKCE S256 transform of a code verifier (RFC 7636 4.2),
// base64url without padding.
func s256(verifier string) string {
	h := sha256.Sum256([]byte(verifier))
	return b64.EncodeToString(h[:])
}

// validVerifier checks RFC 7636 4.1: 43 to 128 unreserved characters.
func validVerifier(v string) bool {
	if len(v) < 43 || len(v) > 128 {
		return false
	}
	for _, c := range []byte(v) {
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
			return false
		}
	}
	return true
}

var b64 = base64.RawURLEncoding
