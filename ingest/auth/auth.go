// Package auth holds workspaces, members and credentials: API keys and
// tracking tokens are random strings with a fixed prefix, shown once and
// stored only as their SHA-256 hash. Store creates and changes them in
// Postgres; Cache resolves a presented credential to an Identity without
// touching Postgres on the hot path.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Credential prefixes (coord.md "Credentials"). Each is followed by 40
// base62 characters.
const (
	APIKeyPrefix        = "ss_live_"
	TrackingTokenPrefix = "ss_track_"
	// tokenRandLen is the number of random base62 characters after a prefix.
	tokenRandLen = 40
)

// Credential kinds, as they appear in Identity.Kind, the request log and
// GET /v1/me.
const (
	KindAPIKey        = "api_key"
	KindTrackingToken = "tracking_token"
	KindOAuth         = "oauth"
)

// Plans and their default contact limits (0 = unlimited) and rate
// multipliers. The contact limit per plan is "not shown" in the spec; these
// are Sendstream's choice, overridable per workspace.
const (
	PlanFree       = "free"
	PlanPro        = "pro"
	PlanEnterprise = "enterprise"
)

// PlanDefaults returns the default contact limit and rate multiplier of a
// plan, and false for an unknown plan.
func PlanDefaults(plan string) (contactLimit int64, rateMultiplier int64, ok bool) {
	switch plan {
	case PlanFree:
		return 1000, 1, true
	case PlanPro:
		return 50000, 1, true
	case PlanEnterprise:
		return 0, 100, true
	}
	return 0, 0, false
}

// Scopes of spec 5.1, exactly. A key with no scopes has full access.
const (
	ScopeContactsRead       = "contacts:read"
	ScopeContactsWrite      = "contacts:write"
	ScopeEventsWrite        = "events:write"
	ScopeTransactionalWrite = "transactional:write"
	ScopeTransactionalRead  = "transactional:read"
	ScopeWebhooksManage     = "webhooks:manage"
	ScopeMCP                = "mcp"
)

// Scopes lists every valid scope in the order of spec 5.1.
var Scopes = []string{
	ScopeContactsRead, ScopeContactsWrite, ScopeEventsWrite,
	ScopeTransactionalWrite, ScopeTransactionalRead, ScopeWebhooksManage, ScopeMCP,
}

// ValidScope reports whether s is one of Scopes.
func ValidScope(s string) bool {
	for _, v := range Scopes {
		if v == s {
			return true
		}
	}
	return false
}

// Errors returned by Cache.Authenticate and Store. Callers map every
// authentication error to 401 and ErrNotFound from Store to "no such object".
var (
	ErrMalformed = errors.New("credential is not a well-formed Sendstream key or token")
	ErrUnknown   = errors.New("unknown credential")
	ErrExpired   = errors.New("credential has expired")
	ErrNotFound  = errors.New("not found")
)

// Identity is what a credential resolves to: the credential and its
// workspace. Values handed out by Cache are shared and must not be modified.
type Identity struct {
	KeyID          string
	Kind           string    // KindAPIKey, KindTrackingToken or KindOAuth
	Scopes         []string  // empty means full access
	ExpiresAt      time.Time // zero means never
	Domains        []string  // tracking tokens: allowed domains; empty allows all
	Workspace      string
	WorkspaceName  string
	Plan           string
	ContactLimit   int64 // 0 means unlimited
	RateMultiplier int64 // at least 1
	Suspended      bool
	// OAuth access tokens only: the member the token acts as ("" for a
	// client_credentials token of an app without a creator) and the app.
	MemberID string
	AppID    string
	AppName  string
	hash     [32]byte
}

// Hash returns the SHA-256 of a credential, the only form ever stored.
func Hash(token string) [32]byte { return sha256.Sum256([]byte(token)) }

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newToken returns prefix + 40 random base62 characters (about 238 bits).
func newToken(prefix string) (string, error) {
	out := make([]byte, 0, len(prefix)+tokenRandLen)
	out = append(out, prefix...)
	var buf [64]byte
	for len(out) < len(prefix)+tokenRandLen {
		if _, err := rand.Read(buf[:]); err != nil {
			return "", fmt.Errorf("random token: %w", err)
		}
		for _, b := range buf {
			if b < 248 { // 248 = 4*62: rejection keeps the distribution uniform
				out = append(out, base62[b%62])
				if len(out) == len(prefix)+tokenRandLen {
					break
				}
			}
		}
	}
	return string(out), nil
}

// ExtraKind is a credential kind added by a feature package (OAuth access
// tokens): tokens of Prefix + 40 base62 characters are resolved by Resolve.
type ExtraKind struct {
	Prefix  string                                                                       // e.g. "ss_oauth_"
	Kind    string                                                                       // e.g. KindOAuth
	Resolve func(ctx context.Context, pg *pgxpool.Pool, hash [32]byte) (Identity, error) // ErrUnknown when none
}

var extraKinds []ExtraKind

// RegisterKind adds a credential kind; call it from an init function (the
// list is read without locking afterwards). It panics on a duplicate or
// empty prefix or kind. The Identity that Resolve returns goes through the
// same cache, expiry, scope and suspension checks as an API key's.
func RegisterKind(k ExtraKind) {
	if k.Prefix == "" || k.Kind == "" || k.Resolve == nil {
		panic("auth: incomplete credential kind")
	}
	for _, p := range append([]string{APIKeyPrefix, TrackingTokenPrefix}, prefixes()...) {
		if p == k.Prefix {
			panic("auth: duplicate credential prefix " + k.Prefix)
		}
	}
	extraKinds = append(extraKinds, k)
}

func prefixes() []string {
	out := make([]string, 0, len(extraKinds))
	for _, k := range extraKinds {
		out = append(out, k.Prefix)
	}
	return out
}

// kindOf returns the credential kind of a well-formed token, or "" when the
// token is malformed: wrong prefix, wrong length, or a non-base62 character.
// It does not allocate.
func kindOf(token []byte) string {
	var kind string
	var n int
	switch {
	case hasPrefix(token, APIKeyPrefix):
		kind, n = KindAPIKey, len(APIKeyPrefix)
	case hasPrefix(token, TrackingTokenPrefix):
		kind, n = KindTrackingToken, len(TrackingTokenPrefix)
	default:
		for _, k := range extraKinds {
			if hasPrefix(token, k.Prefix) {
				kind, n = k.Kind, len(k.Prefix)
			}
		}
		if kind == "" {
			return ""
		}
	}
	if len(token) != n+tokenRandLen {
		return ""
	}
	for _, c := range token[n:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return ""
		}
	}
	return kind
}

func hasPrefix(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }

// hint is what a list shows of a credential: its prefix and last four characters.
func hint(token string) string {
	i := strings.LastIndexByte(token[:len(token)-tokenRandLen], '_') + 1
	return token[:i] + "…" + token[len(token)-4:]
}
